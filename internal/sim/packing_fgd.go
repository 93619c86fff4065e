package sim

import (
	"math"
	"slices"

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
// tries every GPU and keeps the best (the first, by index, of the best).
type fgdScorer struct {
	mix    sched.ShareMix
	before perNode // each node's F_before, as berthScorer keeps its cost
}

func newFGDScorer(pods []PackPod) *fgdScorer { return &fgdScorer{mix: fgdMix(pods)} }

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func (pol *fgdScorer) score(s *packState, n int, p PackPod) (float64, int) {
	node := s.view(n)
	before := pol.before.get(s, n, func() float64 { return pol.mix.Fragmentation(node) })
	var buf [64]int // a node has at most 64 GPUs: no allocation per score
	after := node
	after.CPUFree -= p.CPUMilli
	after.Free = buf[:len(node.Free)]
	score := func() int {
		d := before - pol.mix.Fragmentation(after)
		return int(math.Floor(100 * sigmoid(d/1000)))
	}
	if !p.Sharing() {
		copy(after.Free, node.Free)
		for _, g := range s.gpusFor(n, p) {
			after.Free[g] = 0
		}
		return float64(score()), -1
	}
	// F_after depends on the free values, not on which GPU has them: each
	// value is tried once, on its first GPU, which is the one FGD's own
	// loop over every GPU keeps when it scores best.
	var tried [64]int
	ntried := 0
	bestSc, bestG := math.MinInt, -1
	for g, f := range node.Free {
		if f < p.GPUMilli || slices.Contains(tried[:ntried], f) {
			continue
		}
		tried[ntried] = f
		ntried++
		copy(after.Free, node.Free)
		after.Free[g] -= p.GPUMilli
		if sc := score(); sc > bestSc {
			bestSc, bestG = sc, g
		}
	}
	return float64(bestSc), bestG
}
