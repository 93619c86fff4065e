package sched

import "math/bits"

// bitset is a two-level bitset: words hold the members, summary has bit w
// set when words[w] is non-zero, so next() skips empty stretches 64 words at
// a time. Iteration order is ascending, which is what makes ties break the
// same way on every run.
type bitset struct {
	words   []uint64
	summary []uint64
}

func newBitset(n int) bitset {
	w := (n + 63) / 64
	return bitset{words: make([]uint64, w), summary: make([]uint64, (w+63)/64)}
}

func (b *bitset) set(i int) {
	w := i >> 6
	b.words[w] |= 1 << uint(i&63)
	b.summary[w>>6] |= 1 << uint(w&63)
}

func (b *bitset) clear(i int) {
	w := i >> 6
	b.words[w] &^= 1 << uint(i&63)
	if b.words[w] == 0 {
		b.summary[w>>6] &^= 1 << uint(w&63)
	}
}

// next returns the smallest member ≥ i, or -1.
func (b *bitset) next(i int) int {
	if i < 0 {
		i = 0
	}
	w := i >> 6
	if w >= len(b.words) {
		return -1
	}
	if v := b.words[w] >> uint(i&63); v != 0 {
		return i + bits.TrailingZeros64(v)
	}
	w++
	for sw := w >> 6; sw < len(b.summary); sw++ {
		s := b.summary[sw]
		if sw == w>>6 {
			s &= ^uint64(0) << uint(w&63)
		}
		if s != 0 {
			ww := sw<<6 + bits.TrailingZeros64(s)
			return ww<<6 + bits.TrailingZeros64(b.words[ww])
		}
	}
	return -1
}
