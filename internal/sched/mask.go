package sched

import "github.com/berthsched/berth/internal/model"

// chooseMask picks which k of a node's free GPUs to take.
//
// Without a link matrix it is a buddy allocator's best fit: split the node
// into aligned halves, go into the tighter half that can hold the request,
// and when neither half can, take the tighter half whole and the rest from
// the other. What stays free stays in the largest aligned blocks, so a
// 4-GPU request on an empty 8-GPU node takes {0-3}, never {0,2,4,6}.
//
// With a link matrix, the best-connected set wins (most NVLink links inside
// the set); ties keep the buddy choice.
func chooseMask(n *model.Node, free model.GPUMask, k int) model.GPUMask {
	if free.Count() == k {
		return free
	}
	span := 1
	for span < n.GPUs {
		span <<= 1
	}
	buddy := buddyPick(free, 0, span, k)
	if n.Links == nil {
		return buddy
	}
	best, bestScore := buddy, linkScore(n.Links, buddy)
	for _, start := range free.Indices() {
		m := growConnected(n.Links, free, start, k)
		if s := linkScore(n.Links, m); s > bestScore {
			best, bestScore = m, s
		}
	}
	return best
}

// buddyPick takes k GPUs from free within the aligned block [lo, lo+span).
func buddyPick(free model.GPUMask, lo, span, k int) model.GPUMask {
	block := free & blockMask(lo, span)
	if block.Count() <= k {
		return block
	}
	half := span / 2
	left := free & blockMask(lo, half)
	right := free & blockMask(lo+half, half)
	fl, fr := left.Count(), right.Count()
	switch {
	case fl >= k && fr >= k:
		if fr < fl {
			return buddyPick(free, lo+half, half, k)
		}
		return buddyPick(free, lo, half, k)
	case fl >= k:
		return buddyPick(free, lo, half, k)
	case fr >= k:
		return buddyPick(free, lo+half, half, k)
	case fr < fl:
		return right | buddyPick(free, lo, half, k-fr)
	default:
		return left | buddyPick(free, lo+half, half, k-fl)
	}
}

func blockMask(lo, span int) model.GPUMask {
	return model.FullMask(span) << uint(lo)
}

// growConnected builds a k-GPU set from start, each step adding the free GPU
// with the most links into the set so far (lowest index on ties).
func growConnected(l *model.LinkMatrix, free model.GPUMask, start, k int) model.GPUMask {
	set := model.MaskOf(start)
	for set.Count() < k {
		pick, pickLinks := -1, -1
		for _, g := range (free &^ set).Indices() {
			links := 0
			for _, s := range set.Indices() {
				links += l.Between(g, s)
			}
			if links > pickLinks {
				pick, pickLinks = g, links
			}
		}
		set |= model.MaskOf(pick)
	}
	return set
}

// linkScore is the number of NVLink links inside the set.
func linkScore(l *model.LinkMatrix, m model.GPUMask) int {
	idx := m.Indices()
	s := 0
	for a := 0; a < len(idx); a++ {
		for b := a + 1; b < len(idx); b++ {
			s += l.Between(idx[a], idx[b])
		}
	}
	return s
}
