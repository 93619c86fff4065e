package model

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// MaxGPUsPerNode bounds a node's GPU count: a GPUMask is one machine word.
const MaxGPUsPerNode = 64

// GPUMask is a bitmask over a node's GPUs: bit i set means GPU i.
// Allocations carry a mask, never a count, because which GPUs matters
// (§4): on nodes whose GPUs pair through specific links, {0,1,2,3} and
// {0,2,4,6} are not the same allocation.
type GPUMask uint64

// FullMask returns the mask with GPUs 0..n-1 set.
func FullMask(n int) GPUMask {
	if n >= 64 {
		return ^GPUMask(0)
	}
	return GPUMask(1)<<uint(n) - 1
}

// MaskOf returns the mask with the given GPU indices set.
func MaskOf(gpus ...int) GPUMask {
	var m GPUMask
	for _, g := range gpus {
		m |= 1 << uint(g)
	}
	return m
}

// Count is the number of GPUs in the mask.
func (m GPUMask) Count() int { return bits.OnesCount64(uint64(m)) }

// Has reports whether GPU i is in the mask.
func (m GPUMask) Has(i int) bool { return m&(1<<uint(i)) != 0 }

// Indices lists the GPUs in the mask in ascending order.
func (m GPUMask) Indices() []int {
	out := make([]int, 0, m.Count())
	for v := uint64(m); v != 0; v &= v - 1 {
		out = append(out, bits.TrailingZeros64(v))
	}
	return out
}

// String renders the mask as ranges, e.g. "0-3,6". The empty mask is "-".
func (m GPUMask) String() string {
	if m == 0 {
		return "-"
	}
	var parts []string
	idx := m.Indices()
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseGPUMask reads the String form ("0-3,6", or "-" for empty).
func ParseGPUMask(s string) (GPUMask, error) {
	s = strings.TrimSpace(s)
	if s == "-" || s == "" {
		return 0, nil
	}
	var m GPUMask
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= MaxGPUsPerNode {
			return 0, fmt.Errorf("gpu_mask %q: %q is not a GPU index 0-%d", s, lo, MaxGPUsPerNode-1)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b >= MaxGPUsPerNode {
				return 0, fmt.Errorf("gpu_mask %q: range %q must be low-high with high ≤ %d", s, part, MaxGPUsPerNode-1)
			}
		}
		for g := a; g <= b; g++ {
			m |= 1 << uint(g)
		}
	}
	return m, nil
}

// MarshalText makes masks read as "0-3" in JSON and YAML.
func (m GPUMask) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (m *GPUMask) UnmarshalText(b []byte) error {
	v, err := ParseGPUMask(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
