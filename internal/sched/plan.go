package sched

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// State is the snapshot Plan decides over: what the allocation table holds.
type State struct {
	Nodes       []model.Node
	Allocations []model.Allocation
	// Jobs are shared with the caller (the control loop's copy of the
	// table holds the same pointers): the core only reads them.
	Jobs        []*model.Job
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
	// Grow adds the placement to a running elastic job that had
	// ResizeFrom GPUs (§9.4).
	Grow       bool `json:"grow,omitempty"`
	ResizeFrom int  `json:"resize_from,omitempty"`
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
	// Reason may be shared by the entries of jobs that wait for the same
	// thing (one placement failure said once, not a copy per job: at 1M
	// pending, half of each entry's size); nothing may modify it.
	Reason   *Reason   `json:"reason"`
	Priority *Priority `json:"priority,omitempty"`
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
	return PlanOn(NewIndex(s.Nodes, s.Allocations, s.Config), s, now)
}

// PlanOn is Plan over an index the caller keeps equal to
// NewIndex(s.Nodes, s.Allocations, s.Config), so that a caller running
// many passes (the simulator) need not rebuild it each time. The decision
// is the same as Plan's; the index is back in its input state on return.
func PlanOn(ix *Index, s State, now time.Time) Decision {
	p := newPlanner(&s, ix, now)
	ix.SetMix(shareMix(&s))
	cp := ix.Checkpoint()
	defer ix.Rollback(cp)
	p.inference()
	p.stopLendingAfterReclaim()
	p.training()
	p.growElastic()
	p.defrag()
	p.pageThrottled()
	p.starvation()
	if p.budget.degraded {
		but := ""
		if p.cfg.Pools.Inference != "" {
			but = ", but for serving taking back GPUs it lent"
		}
		p.alert(Alert{ID: "storage-degraded", Severity: SeverityPage, Kind: "storage_degraded",
			Message: fmt.Sprintf("checkpoint storage bandwidth is %s, below %s: preemption is stopped until it recovers%s",
				rateString(p.budget.bandwidth), rateString(p.cfg.Storage.MinBandwidth), but)})
	}
	for _, r := range p.reservations {
		p.d.Reservations = append(p.d.Reservations, *r)
	}
	p.d.Topology = p.ix.available(p.cfg.Pools, false) // as decided: binds and holds in
	return p.d
}

type planner struct {
	s       *State
	cfg     Config
	now     time.Time
	ix      *Index
	d       Decision
	exclude map[int]bool // nodes being emptied: no new inference lands there
	// unlent says why the inference pool is not lent this pass
	// (Lending), or is empty.
	unlent string
	// relocating are the jobs defragmentation is emptying a node for:
	// the only jobs under HoldMinGPUs that hold.
	relocating map[string]bool
	// blocked are pending node-topology requests fragmentation stands in
	// the way of, in the order they were tried.
	blocked []blockedReq

	// owners[k] is the job of allocation k when it is a training job
	// not pending (nil otherwise); running is the number of jobs not
	// pending, holding allocations or not (the queue is the rest). prepare
	// finds them once, by id: later walks of the allocations read the
	// slice, not a map of 100k ids (a hash and a compare of a long key
	// per allocation, per walk, at fleet scale).
	owners       []*model.Job
	running      int
	quota        *quotaBook
	cands        []*victim       // preemption candidates, in preemption order
	backfilled   map[string]bool // reservations with backfill running inside
	held         map[string]bool // owners of allocations that are not known non-pending jobs
	reclaim      map[*podState]int
	stopping     []model.Allocation
	budget       budget
	prevRes      map[repKey]Reservation
	reservations []*Reservation
	throttled    map[string]*throttle
	// Per-pass caches. Within the training phase free GPUs only shrink and
	// later jobs rank lower (fewer victims), so a failure stays a failure.
	// shapes are the pending training's request shapes (queue), each
	// with its noFit and noRoom; shapeIdx finds one.
	shapes    []passShape
	shapeIdx  map[shapeID]int32
	lastShape int32           // the shape internShape found last
	queueBufs *queueBufs      // queue's buffers until putQueue
	noHold    map[shapeID]int // index change count at which holding found nothing
	// hopeless and hopeful bound, per shape, the preempting power at which
	// the starvation check found no room, and found room.
	hopeless, hopeful map[shapeID]int
	// noBackfill: index change count at which no reservation could take
	// this shape as backfill.
	noBackfill map[shapeID]noBackfill
	late       []lateJob     // jobs waiting past StarvationAfter
	byNode     [][]int       // allocations per node, built on first use
	holds      int           // jobs that held free GPUs this pass
	req        model.Request // training's request being decided
	prios      []Priority    // backing store for Pending.Priority
	// elastic are the running elastic jobs below their maximum; bound
	// the elastic jobs this pass binds (both may grow).
	elastic []*model.Job
	bound   []growCand
	// placed counts the allocations of the first counted binds
	// (MaxBinds); capped says the queue's walk stopped there.
	placed, counted int
	capped          bool
}

type lateJob struct {
	job     *model.Job
	pending int // index into d.Pending
}

// noBackfill remembers that no reservation took a shape as backfill for
// jobs running up to maxRuntime, while the index is unchanged.
type noBackfill struct {
	changes    int
	maxRuntime time.Duration
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
	// pending is its entry in Decision.Pending, which a hold defrag
	// takes for it adds to.
	pending int
}

func newPlanner(s *State, ix *Index, now time.Time) *planner {
	cfg := s.Config.withDefaults()
	p := &planner{s: s, cfg: cfg, now: now, ix: ix, exclude: map[int]bool{},
		quota: newQuotaBook(s.Quotas), prevRes: map[repKey]Reservation{},
		throttled: map[string]*throttle{}, shapeIdx: map[shapeID]int32{}, noHold: map[shapeID]int{},
		noBackfill: map[shapeID]noBackfill{}, hopeless: map[shapeID]int{}, hopeful: map[shapeID]int{}}
	p.prepare()
	return p
}

func (p *planner) prepare() {
	p.backfilled = map[string]bool{}
	jobs := make(map[string]*model.Job, len(p.s.Allocations))
	for i := range p.s.Jobs {
		// Pending jobs are reached through the queue; the map serves
		// lookups from allocations, which only running jobs have.
		if j := p.s.Jobs[i]; j.State != model.JobPending {
			jobs[j.ID] = j
			if j.Elastic != nil && j.State == model.JobRunning {
				p.elastic = append(p.elastic, j)
			}
		}
	}
	for _, r := range p.s.Reservations {
		p.prevRes[repKey{r.Owner, r.Replica}] = r
	}
	for _, r := range p.s.Relocations {
		if i, ok := p.ix.byID[r.FromNode]; ok {
			p.exclude[i] = true
		}
		if p.relocating == nil {
			p.relocating = map[string]bool{}
		}
		p.relocating[r.For] = true
	}
	p.running = len(jobs)
	p.owners = make([]*model.Job, len(p.s.Allocations))
	for k, a := range p.s.Allocations {
		if a.Stopping {
			p.stopping = append(p.stopping, a)
		}
		if a.OwnerKind == model.OwnerInference {
			continue
		}
		if j := jobs[a.OwnerID]; j != nil {
			p.owners[k] = j
			p.quota.add(j, a.GPUs.Count(), a.Borrowed || a.OwnerKind == model.OwnerBackfill)
		} else {
			// Pending jobs that still hold allocations (a requeue whose
			// stop has not finished) wait for them: only owners outside
			// jobs (the jobs not pending) can be one, so the set stays
			// small at 100k running, and one lookup an allocation serves
			// both.
			if p.held == nil {
				p.held = map[string]bool{}
			}
			p.held[a.OwnerID] = true
		}
		if a.OwnerKind == model.OwnerBackfill && a.Reservation != "" {
			p.backfilled[a.Reservation] = true
		}
	}
	p.budget = p.newBudget()
	p.stopLendingIf(p.s.StorageBandwidth, p.s.RecentPreemptions)
}

// candidates are the preemption candidates in order, built on first use:
// a pass that places everything never needs them.
func (p *planner) candidates() []*victim {
	if p.cands == nil {
		p.cands = p.victims()
		if p.cands == nil {
			p.cands = []*victim{}
		}
		p.reclaim = p.reclaimable()
	}
	return p.cands
}

// shapeID identifies requests that place identically: every field of a
// request but its owner and priority, whole. The pass places every job of
// a shape with its first job's request, so two requests that differ in
// anything must not share one.
type shapeID struct {
	topo        model.Topology
	kind        model.OwnerKind
	preemptible bool
	gpus        int
	milli       int // a share of one GPU: places nothing like whole GPUs
	worker      int // parts in multiples of it
	replica     int
	cpu, mem    int64
	model       string // the one acceptable GPU model, when there is one
	models      string // two or more, as modelsKey
	profile     string // a MIG profile: a 1g.10gb and a 1g.20gb are both 142 milli
}

func shapeKey(r *model.Request) shapeID {
	k := shapeID{topo: r.Topology, kind: r.Kind, gpus: r.GPUs, milli: r.GPUMilli, worker: r.Worker, replica: r.Replica,
		cpu: r.CPUMilli, mem: r.MemoryMiB, preemptible: r.Preemptible, profile: r.MIGProfile}
	// One model is its own key, in a field of its own (no list's key can
	// equal it): the pass keys every pending job, and building the
	// string was an allocation a job a pass. An empty name (admission
	// refuses it) would read as no list: it keeps the list's key.
	switch {
	case len(r.Models) == 1 && r.Models[0] != "":
		k.model = r.Models[0]
	case len(r.Models) > 0:
		k.models = modelsKey(r.Models)
	}
	return k
}

// modelsKey is a list of GPU model names as one string, each name with
// its length before it: a join on a separator would make ["a|b"] and
// ["a", "b"] one list.
func modelsKey(models []string) string {
	if len(models) == 0 {
		return ""
	}
	var b []byte
	for _, m := range models {
		b = strconv.AppendInt(b, int64(len(m)), 10)
		b = append(b, ':')
		b = append(b, m...)
	}
	return string(b)
}

// noteBlocked remembers node-topology requests that only fragmentation
// keeps out: the GPUs exist, but not together on one node. It follows
// the request's entry in Decision.Pending.
func (p *planner) noteBlocked(req model.Request, why *Reason) {
	if len(p.blocked) < maxBlocked && req.Topology == model.TopologyNode && why.Code == ReasonUnschedulable && why.Constraint == "topology" {
		p.blocked = append(p.blocked, blockedReq{req, *why, len(p.d.Pending) - 1})
	}
}

// maxBlocked bounds the requests defragmentation considers per pass; it
// works on the highest-ranked first and moves at most MaxRelocations
// replicas anyway.
const maxBlocked = 64

// starvation raises R2's guard for the gangs starving found: a
// capacity-planning signal, not a queue position.
func (p *planner) starvation() {
	for i, l := range p.late {
		if i == p.cfg.MaxStarvationAlerts {
			p.alert(Alert{ID: "starvation/more", Severity: SeverityWarn, Kind: "starvation",
				Message: fmt.Sprintf("%d more jobs have waited longer than %s", len(p.late)-i, p.cfg.StarvationAfter)})
			return
		}
		j, why := l.job, p.d.Pending[l.pending].Reason
		p.alert(Alert{ID: "starvation/" + j.ID, Severity: SeverityWarn, Kind: "starvation", Subject: j.ID,
			Message: fmt.Sprintf("this cluster cannot host job %s: waited %s for %d GPUs (%s), and preempting all the work ranked below it would not make room; %s",
				j.ID, p.now.Sub(j.Queued()).Round(time.Minute), j.Shape.GPUs, j.Shape.Topology, why.Message)})
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

// JobsOf is js as State.Jobs wants them: a pointer to each element.
func JobsOf(js []model.Job) []*model.Job {
	out := make([]*model.Job, len(js))
	for i := range js {
		out[i] = &js[i]
	}
	return out
}
