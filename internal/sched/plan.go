package sched

import (
	"sort"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Config holds the core's policy knobs. The zero value is usable: every
// field has a documented default.
type Config struct {
	Pools Pools `json:"pools"`
	// FragTarget is the one-node request size the fragmentation figure is
	// measured against. Default 8 (a TP8 job).
	FragTarget int `json:"frag_target,omitempty"`
	// MaxRelocations bounds defragmentation moves in flight at once
	// (R4: each move over-provisions for up to a minute). Default 4;
	// negative disables defragmentation.
	MaxRelocations int `json:"max_relocations,omitempty"`
}

func (c Config) withDefaults() Config {
	if c.FragTarget == 0 {
		c.FragTarget = 8
	}
	if c.MaxRelocations == 0 {
		c.MaxRelocations = 4
	}
	return c
}

// State is the snapshot Plan decides over: what the allocation table holds.
type State struct {
	Nodes       []model.Node
	Allocations []model.Allocation
	Jobs        []model.Job
	Deployments []model.Deployment
	// Relocations are defragmentation moves already in flight.
	Relocations []Relocation
	Config      Config
}

// Bind places one request: a training job, or one replica of a deployment.
type Bind struct {
	Kind        model.OwnerKind `json:"kind"`
	OwnerID     string          `json:"owner_id"`
	Replica     int             `json:"replica,omitempty"`
	Preemptible bool            `json:"preemptible"`
	Placement
}

// Stop releases a replica the deployment no longer wants (scale-down). It is
// not a preemption: the deployment asked for fewer.
type Stop struct {
	OwnerID     string   `json:"owner_id"`
	Replica     int      `json:"replica"`
	Allocations []string `json:"allocations"`
}

// Pending is a request left unplaced this pass, with why. For a deployment
// it covers Missing replicas starting at Replica.
type Pending struct {
	Kind    model.OwnerKind `json:"kind"`
	OwnerID string          `json:"owner_id"`
	Replica int             `json:"replica,omitempty"`
	Missing int             `json:"missing,omitempty"`
	Reason  Reason          `json:"reason"`
}

// Decision is everything one pass decided, as data. Applying it is the
// control loop's job (or the simulator's); Plan never does.
type Decision struct {
	Binds       []Bind          `json:"binds,omitempty"`
	Stops       []Stop          `json:"stops,omitempty"`
	Relocations []Relocation    `json:"relocations,omitempty"`
	Pending     []Pending       `json:"pending,omitempty"`
	Topology    TopologySummary `json:"topology"`
}

// Plan decides one scheduling pass over a snapshot at time now. Inference
// is placed before training in every pass: first every deployment up to its
// min_replicas (availability), then up to its target; then training jobs by
// priority, then submit time. Requests a node-topology job cannot get
// because of fragmentation trigger defragmentation proposals.
func Plan(s State, now time.Time) Decision {
	_ = now // time-based policy (aging, deadlines) arrives with reservations
	cfg := s.Config.withDefaults()
	ix := NewIndex(s.Nodes, s.Allocations, cfg)
	p := &planner{s: &s, cfg: cfg, ix: ix, exclude: map[int]bool{}}
	for _, r := range s.Relocations {
		if i, ok := ix.byID[r.FromNode]; ok {
			p.exclude[i] = true
		}
	}
	p.inference()
	p.training()
	p.defrag()
	ix.Commit()
	p.d.Topology = ix.Summary(false)
	return p.d
}

type planner struct {
	s       *State
	cfg     Config
	ix      *Index
	d       Decision
	exclude map[int]bool // nodes being emptied: no new work lands there
	// blocked are pending node-topology requests fragmentation stands in
	// the way of, in the order they were tried.
	blocked []blockedReq
}

type blockedReq struct {
	req    model.Request
	reason Reason
}

func (p *planner) inference() {
	deps := append([]model.Deployment(nil), p.s.Deployments...)
	sort.SliceStable(deps, func(a, b int) bool {
		if deps[a].Priority != deps[b].Priority {
			return deps[a].Priority > deps[b].Priority
		}
		return deps[a].ID < deps[b].ID
	})
	have := map[string]map[int][]string{} // deployment → replica → allocation ids
	for _, a := range p.s.Allocations {
		if a.OwnerKind != model.OwnerInference {
			continue
		}
		if have[a.OwnerID] == nil {
			have[a.OwnerID] = map[int][]string{}
		}
		have[a.OwnerID][a.Replica] = append(have[a.OwnerID][a.Replica], a.ID)
	}
	failed := map[string]bool{}
	grow := func(d *model.Deployment, upTo int) {
		reps := have[d.ID]
		if reps == nil {
			reps = map[int][]string{}
			have[d.ID] = reps
		}
		for next := 0; len(reps) < upTo && !failed[d.ID]; next++ {
			if _, ok := reps[next]; ok {
				continue
			}
			req := model.Request{Shape: d.ReplicaShape, Kind: model.OwnerInference, OwnerID: d.ID, Replica: next, Priority: d.Priority}
			pl, why := p.ix.place(&req, p.cfg.Pools, placeOpts{exclude: p.exclude})
			if why != nil {
				failed[d.ID] = true
				p.d.Pending = append(p.d.Pending, Pending{Kind: model.OwnerInference, OwnerID: d.ID, Replica: next, Missing: upTo - len(reps), Reason: *why})
				p.noteBlocked(req, why)
				return
			}
			reps[next] = nil
			p.d.Binds = append(p.d.Binds, Bind{Kind: model.OwnerInference, OwnerID: d.ID, Replica: next, Placement: pl})
		}
	}
	for i := range deps {
		grow(&deps[i], deps[i].MinReplicas)
	}
	for i := range deps {
		d := &deps[i]
		grow(d, d.Target())
		if reps := have[d.ID]; len(reps) > d.Target() {
			p.scaleDown(d, reps)
		}
	}
}

// scaleDown stops replicas beyond the target. Which ones is a free
// defragmentation (R4's "relocate on natural churn"): stop first the
// replicas whose node ends up with the most free GPUs, so scale-down hands
// back whole nodes rather than holes; ties stop the highest-numbered.
func (p *planner) scaleDown(d *model.Deployment, reps map[int][]string) {
	freeAfter := map[int]int{}
	for _, a := range p.s.Allocations {
		if a.OwnerKind != model.OwnerInference || a.OwnerID != d.ID {
			continue
		}
		if i, ok := p.ix.byID[a.NodeID]; ok {
			freeAfter[a.Replica] = max(freeAfter[a.Replica], p.ix.nodes[i].free.Count()+a.GPUs.Count())
		}
	}
	nums := make([]int, 0, len(reps))
	for r := range reps {
		nums = append(nums, r)
	}
	sort.Slice(nums, func(a, b int) bool {
		if freeAfter[nums[a]] != freeAfter[nums[b]] {
			return freeAfter[nums[a]] > freeAfter[nums[b]]
		}
		return nums[a] > nums[b]
	})
	for _, r := range nums[:len(nums)-d.Target()] {
		p.d.Stops = append(p.d.Stops, Stop{OwnerID: d.ID, Replica: r, Allocations: reps[r]})
	}
}

func (p *planner) training() {
	running := map[string]bool{}
	for _, a := range p.s.Allocations {
		if a.OwnerKind != model.OwnerInference {
			running[a.OwnerID] = true
		}
	}
	var queue []*model.Job
	for i := range p.s.Jobs {
		j := &p.s.Jobs[i]
		if j.State == model.JobPending && !running[j.ID] {
			queue = append(queue, j)
		}
	}
	sort.SliceStable(queue, func(a, b int) bool {
		x, y := queue[a], queue[b]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if !x.SubmittedAt.Equal(y.SubmittedAt) {
			return x.SubmittedAt.Before(y.SubmittedAt)
		}
		return x.ID < y.ID
	})
	for _, j := range queue {
		req := j.Request()
		pl, why := p.ix.place(&req, p.cfg.Pools, placeOpts{})
		if why != nil {
			p.d.Pending = append(p.d.Pending, Pending{Kind: model.OwnerTraining, OwnerID: j.ID, Reason: *why})
			p.noteBlocked(req, why)
			continue
		}
		p.d.Binds = append(p.d.Binds, Bind{Kind: model.OwnerTraining, OwnerID: j.ID, Preemptible: j.Preemptible || pl.Borrowed, Placement: pl})
	}
}

// noteBlocked remembers node-topology requests that only fragmentation
// keeps out: the GPUs exist, but not together on one node.
func (p *planner) noteBlocked(req model.Request, why *Reason) {
	if req.Topology == model.TopologyNode && why.Code == ReasonUnschedulable && why.Constraint == "topology" {
		p.blocked = append(p.blocked, blockedReq{req, *why})
	}
}
