package sched

import (
	"slices"
)

// sortQueue puts q in rank order: sorted in place, or (nil then) as the
// order of its indices, returned. At a million pending jobs a comparison
// sort of the queue entries themselves took about half of a plan pass
// (pdqsort moving 48-byte entries, twenty million calls to compare).
// Here each entry gets one 64-bit key that orders as its rank does, as
// far as it goes: tier (2 bits), priority (20 bits, highest first) and
// submit time (42 bits, scaled to fit the queue's span). A radix sort
// of 16-byte (key, index) pairs on it is a fraction of that; entries
// whose keys are equal (same tier, priority and scaled submit time) are
// ordered by their full rank. The result is exactly rank order. A queue
// whose priorities span more than the key holds, or that is small, is
// sorted the plain way.
func sortQueue(q []queued) []int32 {
	byRank := func(a, b queued) int { return a.rank.compare(b.rank) }
	if len(q) < 1024 {
		slices.SortFunc(q, byRank)
		return nil
	}
	minP, maxP := q[0].rank.prio, q[0].rank.prio
	minS, maxS := q[0].rank.submitted, q[0].rank.submitted
	for i := range q {
		r := &q[i].rank
		if r.tier < 0 || r.tier > 3 {
			slices.SortFunc(q, byRank)
			return nil
		}
		minP, maxP = min(minP, r.prio), max(maxP, r.prio)
		minS, maxS = min(minS, r.submitted), max(maxS, r.submitted)
	}
	if uint64(maxP)-uint64(minP) >= 1<<20 || maxP < minP {
		slices.SortFunc(q, byRank)
		return nil
	}
	shift := uint(0)
	for span := uint64(maxS) - uint64(minS); span>>shift >= 1<<42; shift++ {
	}
	bufs := keyedSpare.take()
	defer func() {
		if cap(bufs.keys) <= 4*len(q)+1024 { // a burst's buffers go
			keyedSpare.put(bufs)
		}
	}()
	if cap(bufs.keys) < len(q) {
		c := withHeadroom(len(q))
		bufs.keys, bufs.tmp = make([]keyed, c), make([]keyed, c)
	}
	keys := bufs.keys[:len(q)]
	for i := range q {
		r := &q[i].rank
		keys[i] = keyed{uint64(r.tier)<<62 | uint64(maxP-r.prio)<<42 | (uint64(r.submitted)-uint64(minS))>>shift, int32(i)}
	}
	keys = radixSort(keys, bufs.tmp[:len(q)])
	// Runs of equal keys, in full rank order.
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi].key == keys[lo].key {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(keys[lo:hi], func(a, b keyed) int { return q[a.i].rank.compare(q[b.i].rank) })
		}
		lo = hi
	}
	// The order, not the entries: the sort moves 16-byte keys, and the
	// caller moves each 80-byte entry (pointers, a write barrier each
	// while the collector runs) once, by permute.
	order := make([]int32, len(keys))
	for k, e := range keys {
		order[k] = e.i
	}
	return order
}

// keyed is one queue entry's sort key and its index in the queue.
type keyed struct {
	key uint64
	i   int32
}

// keyedBufs are a sort's keys and its scratch, kept for the next pass
// (pointer-free, 32 MB at a million pending jobs): not allocated anew
// for every pass.
type keyedBufs struct{ keys, tmp []keyed }

var keyedSpare spare[keyedBufs]

// radixSort sorts xs by key, least significant 16 bits first, skipping
// the digits every key shares, with tmp (as long as xs) as scratch; it
// returns the sorted slice (xs or tmp).
func radixSort(xs, tmp []keyed) []keyed {
	var count [1 << 16]int
	for shift := uint(0); shift < 64; shift += 16 {
		clear(count[:])
		for _, x := range xs {
			count[x.key>>shift&0xffff]++
		}
		if count[xs[0].key>>shift&0xffff] == len(xs) {
			continue // one digit for all: nothing to move
		}
		pos := 0
		for d, c := range count {
			count[d] = pos
			pos += c
		}
		for _, x := range xs {
			d := x.key >> shift & 0xffff
			tmp[count[d]] = x
			count[d]++
		}
		xs, tmp = tmp, xs
	}
	return xs
}
