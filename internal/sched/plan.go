package sched

import (
	"fmt"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// State is the snapshot Plan decides over: what the allocation table holds.
type State struct {
	Nodes       []model.Node
	Allocations []model.Allocation
	Jobs        []model.Job
	Deployments []model.Deployment
	Quotas      []model.Quota
	// Reservations are the previous pass's; they carry each reservation's
	// age and the unit it was filling, so a search does not wander.
	Reservations []Reservation
	// Relocations are defragmentation moves already in flight.
	Relocations []Relocation
	// RecentPreemptions covers at least the last hour, for the budget.
	RecentPreemptions []PreemptionRecord
	// StorageBandwidth is the measured checkpoint bandwidth in bytes/s;
	// zero means unmeasured (Config.Storage.Bandwidth is assumed).
	StorageBandwidth float64
	Config           Config
}

// Bind places one request: a training job, a backfill run, or one replica
// of a deployment.
type Bind struct {
	Kind        model.OwnerKind `json:"kind"`
	OwnerID     string          `json:"owner_id"`
	Replica     int             `json:"replica,omitempty"`
	Preemptible bool            `json:"preemptible"`
	// Reservation is, for backfill, the reservation it runs inside.
	Reservation string `json:"reservation,omitempty"`
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
	Kind     model.OwnerKind `json:"kind"`
	OwnerID  string          `json:"owner_id"`
	Replica  int             `json:"replica,omitempty"`
	Missing  int             `json:"missing,omitempty"`
	Reason   Reason          `json:"reason"`
	Priority *Priority       `json:"priority,omitempty"`
}

// Decision is everything one pass decided, as data. Applying it is the
// control loop's job (or the simulator's); Plan never does.
type Decision struct {
	Binds        []Bind          `json:"binds,omitempty"`
	Stops        []Stop          `json:"stops,omitempty"`
	Preemptions  []Preemption    `json:"preemptions,omitempty"`
	Reservations []Reservation   `json:"reservations,omitempty"`
	Relocations  []Relocation    `json:"relocations,omitempty"`
	Pending      []Pending       `json:"pending,omitempty"`
	Alerts       []Alert         `json:"alerts,omitempty"`
	Topology     TopologySummary `json:"topology"`
}

// Plan decides one scheduling pass over a snapshot at time now.
//
//  1. Inference first (never preempted): every deployment up to
//     min_replicas (availability: may preempt whatever the budget says),
//     then up to its target (preempting only within the budget; beyond it
//     a page is raised).
//  2. Training in rank order (effective priority, submit time, id): place
//     on free GPUs within quota; else backfill into a reservation's held
//     GPUs when the job ends before the reservation fills; else make room
//     by preempting the minimal victim set ranked below it; else hold the
//     free GPUs of its best unit until it fills.
//  3. Defragmentation proposals for what fragmentation alone blocks.
func Plan(s State, now time.Time) Decision {
	cfg := s.Config.withDefaults()
	p := &planner{s: &s, cfg: cfg, now: now, ix: NewIndex(s.Nodes, s.Allocations, cfg), exclude: map[int]bool{},
		jobs: map[string]*model.Job{}, quota: newQuotaBook(s.Quotas), prevRes: map[string]Reservation{},
		throttled: map[string]*throttle{}, noRoom: map[string]bool{}, noFit: map[string]noFit{}}
	p.prepare()
	p.inference()
	p.training()
	p.defrag()
	p.pageThrottled()
	p.starvation()
	if p.budget.degraded {
		p.alert(Alert{ID: "storage-degraded", Severity: SeverityPage, Kind: "storage_degraded",
			Message: fmt.Sprintf("checkpoint storage bandwidth is %s, below %s: preemption is stopped until it recovers",
				rateString(p.budget.bandwidth), rateString(cfg.Storage.MinBandwidth))})
	}
	for _, r := range p.reservations {
		p.d.Reservations = append(p.d.Reservations, *r)
	}
	p.ix.Commit()
	p.d.Topology = p.ix.Summary(false)
	return p.d
}

type planner struct {
	s       *State
	cfg     Config
	now     time.Time
	ix      *Index
	d       Decision
	exclude map[int]bool // nodes being emptied: no new inference lands there
	// blocked are pending node-topology requests fragmentation stands in
	// the way of, in the order they were tried.
	blocked []blockedReq

	jobs         map[string]*model.Job
	quota        *quotaBook
	cands        []*victim       // preemption candidates, in preemption order
	backfilled   map[string]bool // reservations with backfill running inside
	stopping     []model.Allocation
	budget       budget
	prevRes      map[string]Reservation
	reservations []*Reservation
	throttled    map[string]*throttle
	// Per-pass caches. Within the training phase free GPUs only shrink and
	// later jobs rank lower (fewer victims), so a failure stays a failure.
	noRoom map[string]bool
	noFit  map[string]noFit
}

// noFit caches a failed placement while the index is unchanged, so that
// thousands of identical pending jobs cost one attempt, and each still
// reads a reason that describes the index it failed on.
type noFit struct {
	why     *Reason
	changes int
}

type blockedReq struct {
	req    model.Request
	reason Reason
}

func (p *planner) prepare() {
	for i := range p.s.Jobs {
		p.jobs[p.s.Jobs[i].ID] = &p.s.Jobs[i]
	}
	for _, r := range p.s.Reservations {
		p.prevRes[resKey(r.Owner, r.Replica)] = r
	}
	for _, r := range p.s.Relocations {
		if i, ok := p.ix.byID[r.FromNode]; ok {
			p.exclude[i] = true
		}
	}
	for _, a := range p.s.Allocations {
		if a.Stopping {
			p.stopping = append(p.stopping, a)
		}
		if a.OwnerKind == model.OwnerInference {
			continue
		}
		if j := p.jobs[a.OwnerID]; j != nil {
			p.quota.add(j, a.GPUs.Count(), a.Borrowed || a.OwnerKind == model.OwnerBackfill)
		}
	}
	p.budget = p.newBudget()
	p.cands = p.victims()
	p.backfilled = map[string]bool{}
	for _, v := range p.cands {
		if v.tier == tierBackfill {
			p.backfilled[v.backfillFor] = true
		}
	}
}

// shapeKey identifies requests that place identically.
func shapeKey(r *model.Request) string {
	return fmt.Sprintf("%s/%d/%v/%d/%d/%s/%t", r.Topology, r.GPUs, r.Models, r.CPUMilli, r.MemoryMiB, r.Kind, r.Preemptible)
}

// noteBlocked remembers node-topology requests that only fragmentation
// keeps out: the GPUs exist, but not together on one node.
func (p *planner) noteBlocked(req model.Request, why *Reason) {
	if req.Topology == model.TopologyNode && why.Code == ReasonUnschedulable && why.Constraint == "topology" {
		p.blocked = append(p.blocked, blockedReq{req, *why})
	}
}

// starvation raises R2's guard: a job waiting longer than StarvationAfter
// is a capacity-planning signal, not a queue position.
func (p *planner) starvation() {
	var late []Pending
	for _, pd := range p.d.Pending {
		if pd.Kind != model.OwnerTraining {
			continue
		}
		if j := p.jobs[pd.OwnerID]; j != nil && p.now.Sub(j.Queued()) >= p.cfg.StarvationAfter {
			late = append(late, pd)
		}
	}
	for i, pd := range late {
		if i == p.cfg.MaxStarvationAlerts {
			p.alert(Alert{ID: "starvation/more", Severity: SeverityWarn, Kind: "starvation",
				Message: fmt.Sprintf("%d more jobs have waited longer than %s", len(late)-i, p.cfg.StarvationAfter)})
			break
		}
		j := p.jobs[pd.OwnerID]
		p.alert(Alert{ID: "starvation/" + j.ID, Severity: SeverityWarn, Kind: "starvation", Subject: j.ID,
			Message: fmt.Sprintf("this cluster cannot host job %s: waited %s for %d GPUs (%s); %s",
				j.ID, p.now.Sub(j.Queued()).Round(time.Minute), j.Shape.GPUs, j.Shape.Topology, pd.Reason.Message)})
	}
}

func sortedInts(m map[int][]string) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
