package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// Options tune a run. The zero value takes the documented defaults.
type Options struct {
	Seed uint64
	// Penalty stretches the runtime of a `node` (tensor-parallel) job that
	// a topology-blind policy spreads over several nodes: +52% step time
	// (§2, §6: 8 badly placed GPUs deliver ~5.3 GPUs of work). Default 0.52.
	Penalty float64
	// Tick batches changes: a pass runs at the first tick boundary after
	// something changed, over everything that changed by then (a control
	// loop does the same with its watch). Default 10s.
	Tick time.Duration
	// BatchTick is the tick for training arrivals and completions, which
	// come thick on a large fleet and need no 60 s SLO. Default: Tick on
	// fleets up to 20,000 GPUs, growing in proportion beyond (50 s at
	// 100,000 GPUs). Inference changes always use Tick.
	BatchTick time.Duration
	// PassEvery is how often a pass runs while work waits and nothing
	// changes (aging, deadlines). Default 5m.
	PassEvery time.Duration
	// SampleEvery is the time series' resolution. Default 10m.
	SampleEvery time.Duration
	// Restart is the range a preempted job's restart overhead is drawn
	// from, uniformly, at every preemption: teardown, requeue, restart
	// and reload (§7: 60-120 s). Default [60s, 120s].
	Restart [2]time.Duration
	// ReadyWithin is the inference SLO: capacity within this long of
	// demand (§1). Default 60s.
	ReadyWithin time.Duration
	// ElasticScaling is the exponent of elastic jobs' speed at n of their
	// max GPUs, (n/max)^ElasticScaling; 0 takes 1 (linear).
	ElasticScaling float64
	// StorageBandwidth for checkpoint writes, bytes/s, when the workload
	// does not say. Default 200 GB/s.
	StorageBandwidth float64
	// Progress, when set, is called as simulated time advances.
	Progress func(done, total time.Duration)
}

func (o Options) withDefaults() Options {
	if o.Penalty == 0 {
		o.Penalty = 0.52
	}
	if o.Tick == 0 {
		o.Tick = 10 * time.Second
	}
	if o.PassEvery == 0 {
		o.PassEvery = 5 * time.Minute
	}
	if o.SampleEvery == 0 {
		o.SampleEvery = 10 * time.Minute
	}
	if o.Restart == [2]time.Duration{} {
		o.Restart = [2]time.Duration{60 * time.Second, 120 * time.Second}
	}
	if o.ReadyWithin == 0 {
		o.ReadyWithin = time.Minute
	}
	if o.ElasticScaling == 0 {
		o.ElasticScaling = 1
	}
	if o.StorageBandwidth == 0 {
		o.StorageBandwidth = 200e9
	}
	return o
}

// Epoch is the virtual clock's start: a Monday, 00:00 UTC.
var Epoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// run is one policy replaying one workload.
type run struct {
	w   *Workload
	pol Policy
	opt Options
	cfg sched.Config

	now    time.Duration
	events eventHeap
	seq    int
	real   int // queued events other than samples and passes

	nodes  []model.Node
	ix     *sched.Index // always equal to NewIndex(nodes, allocations)
	allocs []model.Allocation
	where  map[string]int // allocation id → position in allocs
	nextID int

	// jobs holds the jobs that have arrived and are not done, by arrival
	// number; done jobs are dropped, so memory follows the live set.
	jobs     map[int]*jobRun
	byID     map[string]int
	src      JobSource
	upcoming JobSpec // the next arrival, already scheduled
	arrived  int
	pending  int // jobs waiting to be placed
	// stateJobs is the Jobs of the State handed to the policy: pointers
	// to the live jobs' own records (slot: arrival number → position),
	// so a change to a job shows without a copy and nothing is rebuilt
	// each pass.
	stateJobs []*model.Job
	slot      map[int]int
	svcs      []*svcRun

	reservations []sched.Reservation
	relocs       map[int]sched.Relocation // in flight, by start order
	relocSeq     int
	svcByID      map[string]int
	alive        map[int]bool // services that want or hold replicas
	recent       []sched.PreemptionRecord
	passAt       time.Duration // when the next pass is scheduled; -1 for none
	dirty        bool          // something inference waits on changed
	dirtySlow    bool          // training arrived or finished
	batch        time.Duration // the training tick

	store storage
	rng   *rand.Rand // restart overheads and model loads, seeded
	podOf map[string]string

	m *Metrics
	// Running totals the metrics integrate between events: kept here so
	// no event walks every allocation or service.
	used                float64 // GPUs allocated (a share counts its fraction)
	trainUsed           float64 // of which training and backfill
	penalty             float64 // GPUs lost to topology penalties
	wantGPUs, shortGPUs float64 // inference GPUs wanted, and missing
}

type jobRun struct {
	idx       int
	spec      *JobSpec
	job       model.Job
	remaining time.Duration // full-speed work left
	stretch   float64       // 1, or 1 + Penalty when badly placed
	penalty   float64       // GPUs' worth of work lost to the stretch
	runStart  time.Duration
	allocs    []string
	gpus      int
	gen       int
	started   bool
	done      bool
	preempts  int
	// queuedSince is when the job last entered the queue; waited sums
	// the waits already over (the first, and each after a requeue).
	queuedSince, waited time.Duration
	// stopAt is when its preemption was signalled; stopGen tells the
	// deadline's kill event whether it still applies.
	stopAt   time.Duration
	stopGen  int
	stopping bool
	ran      time.Duration // wall time of the run the preemption ended
	// rate is the job's speed: 1 at its declared size, less for an
	// elastic job running smaller (elasticRate), 0 while it resizes.
	rate float64
	// An elastic job resizing: its workers checkpoint, then restart at
	// the new size; dropping are the allocations a shrink gives up once
	// the checkpoint is written.
	resizing bool
	dropping []string
	resizes  int
	// segStart and segRate are when the job last (re)started and at what
	// speed: a resize killed at its deadline loses the stretch since the
	// last durable checkpoint of that segment.
	segStart time.Duration
	segRate  float64
}

type svcRun struct {
	spec     *ServiceSpec
	dep      model.Deployment
	replicas map[int]*replica
	// ready sums the ready replicas' weights: capacity that serves.
	ready float64
}

// replica is one inference replica: its allocations, and whether its model
// has loaded. A tensor-parallel replica a blind policy split over nodes
// serves at 1/(1+penalty) of one.
type replica struct {
	allocs  []string
	ready   bool
	weight  float64
	penalty float64 // GPUs' worth of its work lost to the split
	gen     int
}

func newRun(w *Workload, pol Policy, opt Options) *run {
	opt = opt.withDefaults()
	nodes, cfg, note := pol.Prepare(w)
	r := &run{w: w, pol: pol, opt: opt, cfg: cfg, nodes: nodes, where: map[string]int{}, jobs: map[int]*jobRun{}, byID: map[string]int{}, slot: map[int]int{},
		relocs: map[int]sched.Relocation{}, svcByID: map[string]int{}, alive: map[int]bool{}, passAt: -1,
		rng: rand.New(rand.NewPCG(opt.Seed, 0x5e1f)), podOf: map[string]string{}}
	r.store = storage{base: w.Storage.Bandwidth, episodes: w.Storage.Episodes}
	if r.store.base == 0 {
		r.store.base = opt.StorageBandwidth
	}
	if r.cfg.Storage.Bandwidth == 0 {
		// What an operator writes in storage.bandwidth: the rated
		// bandwidth of the storage they run, before any degradation.
		// berth assumes it until it measures one, and its floor (R3's
		// guard) is a tenth of it.
		r.cfg.Storage.Bandwidth = r.store.base
	}
	for _, n := range nodes {
		r.podOf[n.ID] = n.Pod
	}
	r.ix = sched.NewIndex(r.nodes, nil, cfg)
	r.m = newMetrics(pol.Name(), w, r.nodes)
	r.batch = opt.BatchTick
	if r.batch == 0 {
		r.batch = opt.Tick * time.Duration(max(1, r.m.GPUs/20000))
	}
	r.m.Note = note
	r.src = w.source()
	r.pull()
	for i := range w.Services {
		s := &w.Services[i]
		r.svcByID[s.ID] = i
		r.svcs = append(r.svcs, &svcRun{spec: s, replicas: map[int]*replica{},
			dep: model.Deployment{ID: s.ID, ReplicaShape: s.Shape, MinReplicas: s.Min, MaxReplicas: s.Max, Priority: s.Priority}})
		r.svcTerm(r.svcs[i], +1) // min_replicas are wanted from the start
		for k, d := range s.Demand {
			r.schedule(d.At, evDemand, i, k)
		}
	}
	r.schedule(0, evSample, 0, 0)
	r.schedule(DefaultDurableEvery, evDurable, 0, 0)
	return r
}

// Run replays the workload through the policy and returns its metrics. An
// error means the policy broke an invariant (bound GPUs already in use).
func Run(w *Workload, pol Policy, opt Options) (m *Metrics, err error) {
	r := newRun(w, pol, opt)
	defer func() {
		if p := recover(); p != nil {
			m, err = nil, fmt.Errorf("policy %s: %v", pol.Name(), p)
		}
	}()
	wall := time.Now()
	r.loop()
	r.m.finish(r, time.Since(wall))
	return r.m, nil
}

func (r *run) loop() {
	horizon := r.w.Horizon
	lastProgress := time.Duration(0)
	for len(r.events) > 0 {
		t := r.events[0].at
		if horizon > 0 && t > horizon {
			break
		}
		r.m.advance(r, t)
		r.now = t
		passNow := false
		for len(r.events) > 0 && r.events[0].at == t {
			e := heap.Pop(&r.events).(event)
			r.m.events++
			if e.kind != evSample && e.kind != evPass && e.kind != evDurable {
				r.real--
			}
			if e.kind == evPass {
				passNow = passNow || e.at == r.passAt
				continue
			}
			r.handle(e)
		}
		if passNow {
			r.passAt = -1
			r.pass()
		}
		if r.dirty {
			r.requestPass(r.nextTick(t, r.opt.Tick, passNow))
		} else if r.dirtySlow {
			r.requestPass(r.nextTick(t, r.batch, passNow))
		}
		r.dirty, r.dirtySlow = false, false
		if r.opt.Progress != nil && t-lastProgress >= time.Hour {
			r.opt.Progress(t, horizon)
			lastProgress = t
		}
		if horizon == 0 && r.idle() {
			break
		}
	}
	if horizon > 0 {
		r.m.advance(r, horizon)
		r.now = horizon
	}
}

// idle reports whether nothing is left to happen but samples and passes.
func (r *run) idle() bool { return r.real == 0 }

func (r *run) handle(e event) {
	switch e.kind {
	case evArrive:
		r.arrive(e.a)
		r.dirtySlow = true
	case evFinish:
		if j := r.jobs[e.a]; j != nil && j.gen == e.b && !j.done {
			r.complete(j)
		}
	case evDemand:
		s := r.svcs[e.a]
		prev := s.dep.Target()
		defer r.svcTerms(s)()
		s.dep.Desired = s.spec.Demand[e.b].Replicas
		if s.dep.Target() > prev {
			r.m.demandUps++
			r.schedule(r.now+r.opt.ReadyWithin, evCheck, e.a, s.dep.Target())
		}
		r.dirty = true
	case evCheck:
		if s := r.svcs[e.a]; s.ready >= float64(min(e.b, s.dep.Target()))-1e-9 {
			r.m.demandMet++
		}
	case evRelocate:
		r.finishRelocation(e.a)
	case evReady:
		r.replicaReady(e.a, e.b, e.c)
	case evStorage:
		if e.b == r.store.gen {
			r.storageEvent()
		}
	case evKill:
		if j := r.jobs[e.a]; j != nil && j.stopping && j.stopGen == e.b {
			r.kill(j)
		} else if j != nil && j.resizing && j.stopGen == e.b {
			if w := r.store.cancel(j.idx, r.now); w != nil {
				r.store.report(w, r.now, false)
			}
			r.kickStorage()
			r.endResize(j, false)
		}
	case evDurable:
		r.durableCheckpoint()
		r.schedule(r.now+DefaultDurableEvery, evDurable, 0, 0)
	case evSample:
		r.m.sample(r)
		r.schedule(r.now+r.opt.SampleEvery, evSample, 0, 0)
	}
}

// nextTick is the first boundary of a tick grid at or after t (after t if
// this very instant already had its pass).
func (r *run) nextTick(t, tick time.Duration, passed bool) time.Duration {
	next := (t + tick - 1) / tick * tick
	if next == t && passed {
		next += tick
	}
	return next
}

// requestPass makes sure a pass runs no later than at.
func (r *run) requestPass(at time.Duration) {
	if r.passAt >= 0 && r.passAt <= at {
		return
	}
	r.passAt = at
	r.schedule(at, evPass, 0, 0)
}

// svcTerms takes a service's share out of the inference running totals;
// the returned func puts it back, as it is after the caller's change.
func (r *run) svcTerms(s *svcRun) func() {
	r.svcTerm(s, -1)
	return func() { r.svcTerm(s, +1) }
}

func (r *run) svcTerm(s *svcRun, sign float64) {
	if i := r.svcByID[s.spec.ID]; sign > 0 {
		if s.dep.Target() > 0 || len(s.replicas) > 0 {
			r.alive[i] = true
		} else {
			delete(r.alive, i)
		}
	}
	g := shapeGPUs(s.spec.Shape)
	want := s.dep.Target()
	r.wantGPUs += sign * float64(want) * g
	if short := float64(want) - s.ready; short > shortEpsilon {
		r.shortGPUs += sign * short * g
	}
}

// shortEpsilon is half a milli: a share replica missing counts as short,
// the float residue of adding and taking the same shares does not.
const shortEpsilon = 0.0005

// waiting reports whether any work is unplaced: then passes keep running.
func (r *run) waiting() bool { return r.pending > 0 || r.shortGPUs > shortEpsilon }

// pull takes the next job from the source and schedules its arrival.
func (r *run) pull() {
	if j, ok := r.src.Next(); ok {
		r.upcoming = j
		r.schedule(j.Submit, evArrive, r.arrived, 0)
	}
}

// arrive admits the upcoming job and pulls the one after it.
func (r *run) arrive(idx int) {
	s := r.upcoming
	j := &jobRun{idx: idx, spec: &s, remaining: s.Work, stretch: 1, queuedSince: s.Submit}
	j.job = model.Job{ID: s.ID, Team: s.Team, Shape: s.Shape, Priority: s.Priority, Preemptible: s.Preemptible,
		MaxRuntime: s.MaxRuntime, State: model.JobPending, SubmittedAt: Epoch.Add(s.Submit)}
	if s.Preemptible || s.Elastic != nil {
		j.job.Checkpoint = &model.Checkpoint{Path: "/ckpt/" + s.ID, SizeBytes: max(s.CheckpointBytes, 1)}
	}
	if ea, ok := r.pol.(elasticAware); ok && ea.Elastic() && s.Elastic != nil {
		j.job.Elastic = s.Elastic
	}
	r.jobs[idx], r.byID[s.ID] = j, idx
	r.slot[idx] = len(r.stateJobs)
	r.stateJobs = append(r.stateJobs, &j.job)
	r.arrived++
	r.pending++
	r.m.JobsSubmitted++
	r.pull()
}

// drop forgets a finished job.
func (r *run) drop(j *jobRun) {
	at, last := r.slot[j.idx], len(r.stateJobs)-1
	moved := r.stateJobs[last]
	r.stateJobs[at] = moved
	r.slot[r.byID[moved.ID]] = at
	r.stateJobs = r.stateJobs[:last]
	delete(r.slot, j.idx)
	delete(r.jobs, j.idx)
	delete(r.byID, j.spec.ID)
}

// pass runs the policy once and applies its decision.
func (r *run) pass() {
	r.m.passes++
	d := r.pol.Plan(r.view(), Epoch.Add(r.now))
	r.apply(d)
	r.ix.Commit() // the journal only grows in a long run otherwise
	if r.waiting() {
		r.requestPass(r.now + r.opt.PassEvery)
	}
}

// View is what a policy sees: the State the control loop would build, and
// an index equal to NewIndex(State.Nodes, State.Allocations, State.Config).
type View struct {
	State sched.State
	Index *sched.Index
}

func (r *run) view() *View {
	s := sched.State{Nodes: r.nodes, Allocations: r.allocs, Reservations: r.reservations,
		RecentPreemptions: r.recentWindow(), StorageBandwidth: r.store.measured(), Config: r.cfg}
	for _, k := range sortedKeys(r.relocs) {
		s.Relocations = append(s.Relocations, r.relocs[k])
	}
	s.Jobs = r.stateJobs
	// Only services that want or hold replicas: a trace can name thousands.
	for _, i := range sortedKeys(r.alive) {
		s.Deployments = append(s.Deployments, r.svcs[i].dep)
	}
	return &View{State: s, Index: r.ix}
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lending is berth's config as a pass would apply it now (sched.Lending).
func (r *run) lending() sched.Config {
	return r.cfg.Lending(r.store.measured(), r.recentWindow(), Epoch.Add(r.now))
}

func (r *run) recentWindow() []sched.PreemptionRecord {
	cut := 0
	for cut < len(r.recent) && Epoch.Add(r.now).Sub(r.recent[cut].At) >= time.Hour {
		cut++
	}
	r.recent = r.recent[cut:]
	return r.recent
}

func (r *run) job(id string) *jobRun {
	if i, ok := r.byID[id]; ok {
		return r.jobs[i]
	}
	return nil
}

func (r *run) addAlloc(a model.Allocation) string {
	r.nextID++
	a.ID = fmt.Sprintf("a%d", r.nextID)
	a.CreatedAt = Epoch.Add(r.now)
	if !r.ix.Assign(a) {
		panic(fmt.Sprintf("bound GPUs %s on %s that are not free (owner %s)", a.GPUs, a.NodeID, a.OwnerID))
	}
	r.where[a.ID] = len(r.allocs)
	r.allocs = append(r.allocs, a)
	r.used += gpusOf(a)
	if a.OwnerKind != model.OwnerInference {
		r.trainUsed += gpusOf(a)
	}
	return a.ID
}

// shapeGPUs is what a shape asks for in GPUs: a share its fraction.
func shapeGPUs(s model.Shape) float64 {
	if s.Fraction() {
		return float64(s.GPUMilli) / 1000
	}
	return float64(s.GPUs)
}

// gpusOf is what an allocation holds in GPUs: a share its fraction.
func gpusOf(a model.Allocation) float64 {
	if a.GPUMilli > 0 && a.GPUMilli < 1000 {
		return float64(a.GPUMilli) / 1000
	}
	return float64(a.GPUs.Count())
}

func (r *run) dropAlloc(id string) {
	i, ok := r.where[id]
	if !ok {
		return
	}
	r.ix.Release(r.allocs[i])
	r.used -= gpusOf(r.allocs[i])
	if r.allocs[i].OwnerKind != model.OwnerInference {
		r.trainUsed -= gpusOf(r.allocs[i])
	}
	last := len(r.allocs) - 1
	r.allocs[i] = r.allocs[last]
	r.where[r.allocs[i].ID] = i
	r.allocs = r.allocs[:last]
	delete(r.where, id)
}
