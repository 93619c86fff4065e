package sim

import (
	"math"
)

// The paper's baselines, as the reference simulator scores them (integer
// scores, ties to the seed's node order).

// randomPolicy keeps its list of feasible nodes between calls.
type randomPolicy struct{ ok *[]int }

func (r randomPolicy) choose(s *packState, p PackPod) (int, []int) {
	ok := (*r.ok)[:0]
	defer func() { *r.ok = ok }()
	req := shareRequest(p)
	for n := range s.nodes {
		if s.fitsReq(n, &req) {
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
	req := shareRequest(p)
	for n := range s.nodes {
		if !s.fitsReq(n, &req) {
			continue
		}
		sc := score(n)
		if sc > bestScore || sc == bestScore && s.rank[n] < s.rank[best] {
			best, bestScore = n, sc
		}
	}
	return best
}

// bestFitPolicy keeps its per-node scores between calls: one slice, not
// a map a pod (the map made it the slowest policy of the experiment).
type bestFitPolicy struct{ raw *[]int }

func newBestFit() bestFitPolicy { return bestFitPolicy{raw: new([]int)} }

// unfit marks a node that cannot take the pod in bestFitPolicy's scores.
const unfit = math.MinInt

// choose scores r = ½·CPU left/128 cores + ½·GPU milli left/8 GPUs after
// placement, as ⌊100(1−r)⌋ rescaled min–max over the feasible nodes.
func (b bestFitPolicy) choose(s *packState, p PackPod) (int, []int) {
	if len(*b.raw) != len(s.nodes) {
		*b.raw = make([]int, len(s.nodes))
	}
	raw := *b.raw
	lo, hi := math.MaxInt, math.MinInt
	req := shareRequest(p)
	for n := range s.nodes {
		if !s.fitsReq(n, &req) {
			raw[n] = unfit
			continue
		}
		cpuLeft := float64(s.views[n].CPUFree - p.CPUMilli)
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
	best, bestScore := -1, math.MinInt
	for n, sc := range raw {
		if sc == unfit {
			continue
		}
		if hi == lo {
			sc = 0
		} else {
			sc = (sc - lo) * 100 / (hi - lo)
		}
		if sc > bestScore || sc == bestScore && s.rank[n] < s.rank[best] {
			best, bestScore = n, sc
		}
	}
	if best < 0 {
		return -1, nil
	}
	return best, s.gpusFor(best, p)
}
