package sim

import (
	"math"

	"github.com/berthsched/berth/internal/sched"
)

// fgdMix is FGD's "typical pods": the trace's most frequent task types up
// to 95% of tasks (sched.TypicalMix), with memory left out, as FGD leaves
// it out of fragmentation.
func fgdMix(pods []PackPod) sched.ShareMix {
	reqs := make([]sched.ShareRequest, len(pods))
	for i, p := range pods {
		reqs[i] = shareRequest(p)
	}
	mix := sched.TypicalMix(reqs)
	for i := range mix {
		mix[i].MemoryMiB = 0
	}
	return mix
}

// fgdScorer is FGD: ⌊100·sigmoid((F_before − F_after)/1000)⌋; a fraction
// tries every GPU and keeps the best.
type fgdScorer struct{ mix sched.ShareMix }

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func (pol fgdScorer) score(s *packState, n int, p PackPod) (float64, int) {
	node := s.view(n)
	before := pol.mix.Fragmentation(node)
	after := node
	after.CPUFree -= p.CPUMilli
	after.Free = make([]int, len(node.Free))
	try := func(gpus []int) int {
		copy(after.Free, node.Free)
		for _, g := range gpus {
			if p.Sharing() {
				after.Free[g] -= p.GPUMilli
			} else {
				after.Free[g] = 0
			}
		}
		d := before - pol.mix.Fragmentation(after)
		return int(math.Floor(100 * sigmoid(d/1000)))
	}
	if !p.Sharing() {
		return float64(try(s.gpusFor(n, p))), -1
	}
	bestSc, bestG := math.MinInt, -1
	for g, f := range s.free[n] {
		if f >= p.GPUMilli {
			if sc := try([]int{g}); sc > bestSc {
				bestSc, bestG = sc, g
			}
		}
	}
	return float64(bestSc), bestG
}
