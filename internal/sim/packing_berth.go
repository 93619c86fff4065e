package sim

import "github.com/berthsched/berth/internal/sched"

// berthScorer is berth's own policy: the share placer the product uses in
// sharing pools (sched.SharePlacer), against the demand mix of the trace.
type berthScorer struct {
	placer *sched.SharePlacer
	before perNode // each node's cost before the placement
}

func newBerthScorer(pods []PackPod) *berthScorer {
	reqs := make([]sched.ShareRequest, len(pods))
	for i, p := range pods {
		reqs[i] = shareRequest(p)
	}
	return &berthScorer{placer: sched.NewSharePlacer(sched.MixOf(reqs))}
}

func shareRequest(p PackPod) sched.ShareRequest {
	return sched.ShareRequest{CPUMilli: p.CPUMilli, MemoryMiB: p.MemoryMiB, GPUs: p.NumGPU, GPUMilli: p.GPUMilli, Models: p.Models}
}

func (b *berthScorer) score(s *packState, n int, p PackPod) (float64, int) {
	node := s.view(n)
	before := b.before.get(s, n, func() float64 { return b.placer.Cost(node) })
	return b.placer.ScoreFrom(node, shareRequest(p), before)
}

// fleet is the product's reserve for scarce GPU models
// (sched.SharePlacer.Reserve), from the fleet's free GPUs of the node's
// model.
func (b *berthScorer) fleet(s *packState, n int, p PackPod) float64 {
	if !b.placer.Scarce() {
		return 0
	}
	m := s.nodes[n].Model
	return -b.placer.Reserve(m, s.freeByModel[m], shareRequest(p))
}
