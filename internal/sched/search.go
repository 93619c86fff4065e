package sched

import "math/bits"

// fitFunc reports whether node i can also supply the cpu and memory that
// come with taking n GPUs there.
type fitFunc func(i, n int) bool

// nodeScore ranks a node for a k-GPU request by R1, lower is better:
// exact fill first, then a partial node already hosting k-GPU allocations
// (shape-aligned), then any other partial node, then an untouched node;
// inside a tier, the tightest remainder. Untouched nodes come last even
// though R1's sketch counts "no affinity" as aligned: handing a small
// request a whole node while a partial one can take it is exactly the
// ratchet §6 warns about.
type nodeScore struct{ tier, rem int }

const (
	tierExact = iota
	tierAligned
	tierPartial
	tierEmpty
	tierNone
)

func (a nodeScore) less(b nodeScore) bool {
	if a.tier != b.tier {
		return a.tier < b.tier
	}
	return a.rem < b.rem
}

// scoreOf is the R1 score of putting k GPUs on node i.
func (ix *Index) scoreOf(i, k int) nodeScore {
	ns := &ix.nodes[i]
	f := ns.free.Count()
	switch c := ix.class(ns); {
	case f == k:
		return nodeScore{tierExact, 0}
	case c == k:
		return nodeScore{tierAligned, f - k}
	case c == 0:
		return nodeScore{tierEmpty, f - k}
	}
	return nodeScore{tierPartial, f - k}
}

// firstIn returns the lowest node of bucket b in group g that passes fit,
// looking only at pod (or at every pod when pod < 0), or -1.
func (ix *Index) firstIn(g *group, b, pod, k int, fit fitFunc) int {
	if pod >= 0 {
		return ix.firstInPod(g.pods[pod], b, k, fit)
	}
	pw := &g.podsWith[b]
	for p := pw.next(0); p >= 0; p = pw.next(p + 1) {
		if i := ix.firstInPod(g.pods[p], b, k, fit); i >= 0 {
			return i
		}
	}
	return -1
}

func (ix *Index) firstInPod(p *podState, b, k int, fit fitFunc) int {
	if p.counts[b] == 0 {
		return -1
	}
	words := p.buckets[b*p.words : (b+1)*p.words]
	for w, v := range words {
		for ; v != 0; v &= v - 1 {
			i := p.nodes[w<<6+bits.TrailingZeros64(v)]
			if fit == nil || fit(i, k) {
				return i
			}
		}
	}
	return -1
}

// bestNode finds the R1-best node of group g for k GPUs (within one pod when
// pod ≥ 0). Ties go to the lowest node index. It returns -1 when no node
// fits. Cost: a bounded number of bucket probes, independent of fleet size
// unless cpu or memory rule out many candidates.
func (ix *Index) bestNode(g *group, k, pod int, fit fitFunc) (int, nodeScore) {
	if k < 1 || k > g.size {
		return -1, nodeScore{tierNone, 0}
	}
	// Exact fill: any shape class. A request of a whole node fills an
	// untouched one: from the tightest pod, like the untouched tier.
	if k == g.size && pod < 0 {
		if i := ix.firstInTightest(g, g.bucketOf(k, 0), k, fit); i >= 0 {
			return i, nodeScore{tierExact, 0}
		}
	}
	if i := ix.minOver(g, k, 0, g.mixed(), -1, pod, k, fit); i >= 0 {
		return i, nodeScore{tierExact, 0}
	}
	for f := k + 1; f <= g.size; f++ {
		if i := ix.firstIn(g, g.bucketOf(f, k), pod, k, fit); i >= 0 {
			return i, nodeScore{tierAligned, f - k}
		}
	}
	for f := k + 1; f <= g.size; f++ {
		if i := ix.minOver(g, f, 1, g.mixed(), k, pod, k, fit); i >= 0 {
			return i, nodeScore{tierPartial, f - k}
		}
	}
	for f := k + 1; f <= g.size; f++ {
		b := g.bucketOf(f, 0)
		i := -1
		if pod < 0 {
			i = ix.firstInTightest(g, b, k, fit)
		} else {
			i = ix.firstIn(g, b, pod, k, fit)
		}
		if i >= 0 {
			return i, nodeScore{tierEmpty, f - k}
		}
	}
	return -1, nodeScore{tierNone, 0}
}

// firstInTightest is firstIn across pods, taking the node from the pod
// with the fewest free GPUs (ties: the lowest pod). Breaking into an
// untouched node anywhere costs the same R1 score, but breaking it in an
// already busy pod keeps the emptiest pods whole for the pod gangs that
// need a whole leaf switch: a 64-GPU gang on a 16-node dev fleet found no
// empty pod because 1-GPU sweeps had opened a node in each.
func (ix *Index) firstInTightest(g *group, b, k int, fit fitFunc) int {
	best, bestFree := -1, 0
	pw := &g.podsWith[b]
	for p := pw.next(0); p >= 0; p = pw.next(p + 1) {
		ps := g.pods[p]
		if best >= 0 && ps.free >= bestFree {
			continue
		}
		if i := ix.firstInPod(ps, b, k, fit); i >= 0 {
			best, bestFree = i, ps.free
		}
	}
	return best
}

// minOver returns the lowest fitting node with f free GPUs over shape
// classes lo..hi, skipping class skip.
func (ix *Index) minOver(g *group, f, lo, hi, skip, pod, k int, fit fitFunc) int {
	best := -1
	for c := lo; c <= hi; c++ {
		if c == skip {
			continue
		}
		if i := ix.firstIn(g, g.bucketOf(f, c), pod, k, fit); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// largestPiece returns the node with the most free GPUs up to limit and
// below a whole node, at least unit of them, or -1. Gang remainders take
// such pieces (rounded down to a multiple of unit) so that whole nodes
// stay whole; when unit does not divide a node, whole nodes are pieces
// too, since no other step takes them.
func (ix *Index) largestPiece(g *group, limit, pod, unit int, fit fitFunc) int {
	top := min(limit, g.size-1)
	if g.size%unit != 0 {
		top = min(limit, g.size)
	}
	for f := top; f >= unit; f-- {
		if i := ix.minOver(g, f, 0, g.mixed(), -1, pod, f, fit); i >= 0 {
			return i
		}
	}
	return -1
}
