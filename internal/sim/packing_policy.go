package sim

import (
	"math"
)

// The paper's baselines, as the reference simulator scores them (integer
// scores, ties to the seed's node order).

type randomPolicy struct{}

func (randomPolicy) choose(s *packState, p PackPod) (int, []int) {
	var ok []int
	for n := range s.nodes {
		if s.fits(n, p) {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return -1, nil
	}
	n := ok[s.r.Intn(len(ok))]
	return n, s.randomGPUs(n, p)
}

func (s *packState) randomGPUs(n int, p PackPod) []int {
	switch {
	case p.NumGPU == 0:
		return nil
	case p.Sharing():
		var ok []int
		for g, f := range s.free[n] {
			if f >= p.GPUMilli {
				ok = append(ok, g)
			}
		}
		return []int{ok[s.r.Intn(len(ok))]}
	}
	return s.wholeGPUs(n, p.NumGPU)
}

// gpusFor is how the non-random baselines bind: tightest GPU for a
// fraction, lowest-index free GPUs for whole ones.
func (s *packState) gpusFor(n int, p PackPod) []int {
	switch {
	case p.NumGPU == 0:
		return nil
	case p.Sharing():
		return []int{s.tightestGPU(n, p.GPUMilli)}
	}
	return s.wholeGPUs(n, p.NumGPU)
}

// pickMax returns the feasible node with the highest score, ties to the
// lowest rank.
func (s *packState) pickMax(p PackPod, score func(n int) int) int {
	best, bestScore := -1, math.MinInt
	for n := range s.nodes {
		if !s.fits(n, p) {
			continue
		}
		sc := score(n)
		if sc > bestScore || sc == bestScore && s.rank[n] < s.rank[best] {
			best, bestScore = n, sc
		}
	}
	return best
}

type bestFitPolicy struct{}

// choose scores r = ½·CPU left/128 cores + ½·GPU milli left/8 GPUs after
// placement, as ⌊100(1−r)⌋ rescaled min–max over the feasible nodes.
func (bestFitPolicy) choose(s *packState, p PackPod) (int, []int) {
	raw := make(map[int]int)
	lo, hi := math.MaxInt, math.MinInt
	for n := range s.nodes {
		if !s.fits(n, p) {
			continue
		}
		cpuLeft := float64(s.nodes[n].CPUMilli - s.cpuUsed[n] - p.CPUMilli)
		var gpuLeft float64
		for _, f := range s.free[n] {
			gpuLeft += float64(f)
		}
		gpuLeft -= float64(p.Demand())
		r := 0.5*cpuLeft/128000 + 0.5*gpuLeft/8000
		sc := int(math.Floor(100 * (1 - r)))
		raw[n] = sc
		lo, hi = min(lo, sc), max(hi, sc)
	}
	if len(raw) == 0 {
		return -1, nil
	}
	n := s.pickMax(p, func(n int) int {
		if hi == lo {
			return 0
		}
		return (raw[n] - lo) * 100 / (hi - lo)
	})
	return n, s.gpusFor(n, p)
}
