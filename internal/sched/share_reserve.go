package sched

// Scarce GPU models. Work that runs on any model should not take the last
// free GPUs of a model that other work can run on alone: FGD's gradient
// (and berth's cost) count a node's free GPUs as fragmented for every
// type that cannot use its model, so on their own they steer flexible
// work toward exactly the models fewer types accept, and the work pinned
// to those models then fails while another model has GPUs to spare.
//
// claim[m] is the GPU milli per request that the mix's model-constrained
// types want of model m (a type accepting k models spreads its demand over
// them). Placing d milli on model m costs reserveWeight × d × claim[m] /
// free(m), where free(m) is what the pool has free of m: nothing while m
// is plentiful, more and more as the work pinned to it would find it
// gone. On an openb variant where a third of the GPU tasks name a model,
// this took berth from 7.33% of capacity unallocated at 100% arrived to
// 4.03 (FGD: 7.24); docs/sharing.md has the figures.

// reserveWeight weighs the reserve against the rest of the score (tuned
// on openb variants with 10-33% of GPU tasks pinned to models: 3 to 100
// land within 0.15 points of each other, 1 is too weak).
const reserveWeight = 3

// claims is the mix's constrained demand per request by GPU model.
func claims(mix ShareMix) map[string]float64 {
	var out map[string]float64
	for _, t := range mix {
		if len(t.Models) == 0 || t.GPUs == 0 {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		d := float64(t.GPUs*t.GPUMilli) / float64(len(t.Models))
		for _, m := range t.Models {
			out[m] += t.P * d
		}
	}
	return out
}

// Scarce reports whether the reserve can matter: some type in the mix is
// pinned to GPU models. Callers skip counting free GPUs by model when not.
func (p *SharePlacer) Scarce() bool { return len(p.claim) > 0 }

// Reserve is what placing r on a node of the model costs, given the
// pool's free GPU milli of that model (including the node's): subtract it
// from Score.
func (p *SharePlacer) Reserve(model string, free int64, r ShareRequest) float64 {
	c := p.claim[model]
	if c == 0 || free <= 0 || r.GPUs == 0 {
		return 0
	}
	return reserveWeight * 1000 * float64(r.GPUs*r.GPUMilli) * c / float64(free)
}
