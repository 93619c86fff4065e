package sched

import "github.com/berthsched/berth/internal/model"

// Pools configures shape segregation (§6 supporting rules, R1). Each field
// names a node pool (Node.Pool); an empty name means that pool does not
// exist. With no pool named, every node serves every request.
//
//   - Small takes 1..SmallMaxGPUs GPU work (notebooks, small inference, dev)
//     so its churn cannot fragment whole nodes.
//   - Inference takes inference replicas of at least InferenceMinGPUs GPUs
//     (4 and 8 on an 8-GPU node: shapes that divide a node).
//   - Training takes everything else, and may borrow Inference headroom,
//     but only as preemptible work (R1), when BorrowInference is set.
//   - Swap is R4's swap pool: whole nodes held back from normal placement,
//     used only as relocation scratch by defragmentation.
type Pools struct {
	Training  string `json:"training,omitempty" yaml:"training,omitempty"`
	Inference string `json:"inference,omitempty" yaml:"inference,omitempty"`
	Small     string `json:"small,omitempty" yaml:"small,omitempty"`
	Swap      string `json:"swap,omitempty" yaml:"swap,omitempty"`
	// Sharing is the pool whose GPUs take shares (gpu_milli): default
	// "sharing". No other pool's GPUs are ever shared.
	Sharing          string `json:"sharing,omitempty" yaml:"sharing,omitempty"`
	SmallMaxGPUs     int    `json:"small_max_gpus,omitempty" yaml:"small_max_gpus,omitempty"`
	InferenceMinGPUs int    `json:"inference_min_gpus,omitempty" yaml:"inference_min_gpus,omitempty"`
	BorrowInference  bool   `json:"borrow_inference,omitempty" yaml:"borrow_inference,omitempty"`
	// BorrowMaxGPUs caps the jobs that may borrow the inference pool.
	// Default: no cap. Taking back one replica's GPUs from a borrower
	// preempts all of it, so a large borrower is reclaimed whole when
	// serving grows; but with a 32-GPU cap, measured on the seed mix,
	// the inference pool's nightly headroom went only to gangs that are
	// a quarter of the training GPU-hours while the 128 and 256-GPU
	// gangs queued (BENCHMARKS.md, "one hold, a week, no borrow cap").
	// Positive: the cap in GPUs.
	BorrowMaxGPUs int `json:"borrow_max_gpus,omitempty" yaml:"borrow_max_gpus,omitempty"`
	// SmallOverflow lets training for the small pool overflow into the
	// training pool when the small pool is full.
	SmallOverflow bool `json:"small_overflow,omitempty" yaml:"small_overflow,omitempty"`
}

// DefaultPools names the three pools and the swap pool the way SizePools
// labels a fleet.
func DefaultPools() Pools {
	return Pools{Training: "training", Inference: "inference", Small: "small", Swap: "swap",
		SmallMaxGPUs: 4, InferenceMinGPUs: 4, BorrowInference: true, SmallOverflow: true}
}

// SharingPool is the pool fractions go to.
func (p *Pools) SharingPool() string {
	if p.Sharing == "" {
		return "sharing"
	}
	return p.Sharing
}

func (p *Pools) configured() bool {
	return p.Training != "" || p.Inference != "" || p.Small != ""
}

// route is one pool a request may use, in order of preference.
type route struct {
	pool string
	any  bool // every pool but Swap (pools not configured)
	// skip is a pool an any route leaves out (the sharing pool, tried
	// after it).
	skip     string
	borrowed bool
}

// routes says where a request may go, best first.
func (p *Pools) routes(req *model.Request) []route {
	if !p.configured() {
		// Whole-GPU work goes to the sharing pool's nodes only on a
		// fleet with no other nodes for it (place): those nodes are
		// where shares fit, and a fleet's long tail found them full of
		// whole-GPU sweeps and replicas.
		return []route{{any: true, skip: p.SharingPool()}, {pool: p.SharingPool()}}
	}
	smallMax, infMin := p.smallMax(), p.InferenceMinGPUs
	if infMin == 0 {
		infMin = 4
	}
	var out []route
	add := func(pool string, borrowed bool) {
		if pool != "" {
			out = append(out, route{pool: pool, borrowed: borrowed})
		}
	}
	switch {
	case req.Kind == model.OwnerInference && req.GPUs >= infMin:
		// Replicas that divide a node go to their pool, or with none
		// share the training pool: never the small pool's churn.
		if p.Inference != "" {
			add(p.Inference, false)
		} else {
			add(p.Training, false)
		}
	case req.GPUs <= smallMax && p.Small != "":
		// Sub-node work fills the small pool first, then partial nodes of
		// the training pool: a small pool sized for the mean would
		// otherwise queue the business-hours peak of notebooks while
		// training nodes have holes no gang can use.
		add(p.Small, false)
		if req.Kind != model.OwnerInference && p.SmallOverflow {
			add(p.Training, false)
		}
	default:
		add(p.Training, false)
		if req.Kind != model.OwnerInference && req.Preemptible && p.BorrowInference && req.GPUs <= p.borrowMax() {
			add(p.Inference, true)
		}
	}
	return out
}

// groupsFor lists the groups a route reaches whose GPU model the request
// accepts.
func (ix *Index) groupsFor(r route, req *model.Request, swap string) []*group {
	var out []*group
	for _, g := range ix.groups {
		if r.any {
			if swap != "" && g.pool == swap || r.skip != "" && g.pool == r.skip {
				continue
			}
		} else if g.pool != r.pool {
			continue
		}
		if req.AcceptsModel(g.model) {
			out = append(out, g)
		}
	}
	return out
}

// borrowMax is BorrowMaxGPUs with its default; no cap is the largest int.
func (p *Pools) borrowMax() int {
	if p.BorrowMaxGPUs <= 0 {
		return int(^uint(0) >> 1)
	}
	return p.BorrowMaxGPUs
}

// smallMax is SmallMaxGPUs with its default.
func (p *Pools) smallMax() int {
	if p.SmallMaxGPUs == 0 {
		return 4
	}
	return p.SmallMaxGPUs
}
