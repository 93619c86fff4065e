package model

import (
	"math"
	"math/bits"
)

// Share is the part of a shape-wide total that n of its k GPUs carry.
func Share(total int64, n, k int) int64 {
	if total <= 0 || n <= 0 || k <= 0 {
		return 0
	}
	// 128-bit product: a tenant's cpu_milli near the int64 limit must not
	// wrap to a negative share (which once bound, and wedged its node).
	hi, lo := bits.Mul64(uint64(total), uint64(n))
	lo, carry := bits.Add64(lo, uint64(k)-1, 0)
	hi += carry
	if hi >= uint64(k) {
		return math.MaxInt64 // does not fit anywhere, and says so
	}
	q, _ := bits.Div64(hi, lo, uint64(k))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}
