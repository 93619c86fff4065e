package sim

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/sched"
)

// The relaxation rows' names in --policy and in reports.
const (
	BoundName    = "bound"
	FluidName    = "fluid"
	FluidSLOName = "fluid-slo"
)

// The relaxation rows replay the training jobs on one fluid pool of GPUs,
// a fleet no real policy runs on:
//
//   - No nodes, pods, pools or topology: nothing fragments, no shape is
//     ever split or stretched.
//   - Inference takes exactly its wanted replicas' GPUs at every instant
//     (ready at once, never shed), and training the rest: the relaxation
//     keeps the constraint every berth figure is held to, that inference
//     is served.
//   - Jobs pause and resume for free: no checkpoint, restart or model
//     load, no progress lost. An elastic job runs at any size from its
//     minimum up, at the engine's speed for that size, and resizes for
//     free.
//   - Jobs run in one order, recomputed at every arrival, completion and
//     change of inference demand; one that does not fit lets a later one
//     that does run (greedy backfill, no reservation).
//
// A queue time counts as it does for the policies: every wait until the
// job completes, jobs not done at the end with what they waited so far.
//
// `bound` replays each size class alone: the class has all of training's
// GPUs, every other job yields to it at once. It replays the class in
// three orders (priority, fewest GPUs first, least work first) and keeps
// the one with the lowest p90. Each class's figures come from its own
// replays, so the row is what each class could get if it alone were
// favoured; no policy gets every class's figure at once. It is a
// relaxation, not a proof for quantiles (an order not tried could give a
// class a lower p90 still), but a class whose p90 is over a target here
// is likely held over it by the load and inference's demand rather than
// by a policy.
//
// Inference is served in full, so the rows relax only what a policy that
// serves it faces: one that sheds demand has more GPUs for training than
// they give.
//
// `fluid` replays all of training together by priority, then submit
// time: not a bound (a policy that favours a class can beat it there),
// but what queues the load makes once topology, pools and the cost of
// preemption are taken away. A policy's distance from it is what those
// cost it, and where it chose to spend them.
//
// `fluid-slo` asks what is left for the large classes once §1's SLO class
// (under 64 GPUs) meets its 30-minute target: the same replay, but a job
// of the class ranks below every large job until it has waited
// SLOPromote (20 minutes), then above them all; priority orders each
// tier. The class is served just in time, and the large jobs get all the
// rest. The order changes as jobs wait, so it is recomputed at every
// promotion too.

// Bound is the bound row for w.
func Bound(w *Workload, opt Options) *Metrics {
	return relax(w, opt, BoundName, ranking{})
}

// Fluid is the fluid row for w.
func Fluid(w *Workload, opt Options) *Metrics {
	return relax(w, opt, FluidName, ranking{less: byPriority})
}

// FluidSLO is the fluid-slo row for w.
func FluidSLO(w *Workload, opt Options) *Metrics {
	return relax(w, opt, FluidSLOName, ranking{less: bySLO, wake: promoted})
}

// SLOPromote is how long a job of the SLO class waits in the fluid-slo
// replay before it ranks above the large jobs: two thirds of §1's 30
// minutes, so that it starts well inside them.
const SLOPromote = 20 * time.Minute

// ranking is a replay's order: less says whether a runs before b. When
// the order depends on how long jobs have waited, wake says when it may
// next change (it is recomputed then, as well as at every event), and
// mark, when set, updates what less reads before each sort.
type ranking struct {
	less func(a, b *boundRun) bool
	wake func(r *boundReplay) float64
	mark func(r *boundReplay)
}

// relax replays w on the fluid pool: all of training in one order, or
// (an empty ranking) each class alone in the best of three.
func relax(w *Workload, opt Options, name string, order ranking) *Metrics {
	opt = opt.withDefaults()
	wall := time.Now()
	m := newMetrics(name, w, w.Nodes)
	m.Bound = true
	horizon := w.Horizon.Seconds()
	var jobs []boundJob
	w.eachJob(func(j *JobSpec) {
		if !w.replays(j) {
			return
		}
		b := boundJob{submit: j.Submit.Seconds(), work: j.Work.Seconds(), milli: toMilli(shapeGPUs(j.Shape)), priority: j.Priority, seq: len(jobs)}
		if j.Elastic != nil {
			b.min = int64(j.Elastic.MinGPUs) * 1000
		}
		for _, c := range jobClasses(j) {
			b.classes |= 1 << classIndex(c)
		}
		jobs = append(jobs, b)
	})
	base, steps := inferenceSteps(w)
	replay := func(mine []boundJob, keep uint8, order ranking) *boundReplay {
		r := &boundReplay{jobs: mine, steps: steps, milli: int64(m.GPUs) * 1000, inference: base, horizon: horizon, scaling: opt.ElasticScaling,
			keep: keep, order: order, queue: map[string][]float64{}, first: map[string][]float64{}}
		r.run()
		return r
	}
	end := 0.0
	take := func(r *boundReplay) {
		maps.Copy(m.queue, r.queue)
		maps.Copy(m.firstQueue, r.first)
		end = max(end, r.t)
	}
	if order.less != nil {
		take(replay(jobs, 0xff, order))
	} else {
		for i, c := range SizeClasses {
			var mine []boundJob
			for _, j := range jobs {
				if j.classes&(1<<i) != 0 {
					mine = append(mine, j)
				}
			}
			if len(mine) == 0 {
				continue
			}
			var best *boundReplay
			for _, less := range []func(a, b *boundRun) bool{byPriority, bySize, byWork} {
				r := replay(mine, 1<<i, ranking{less: less})
				if best == nil || lower(percentiles(r.queue[c]), percentiles(best.queue[c])) {
					best = r
				}
			}
			take(best)
		}
	}
	m.JobsSubmitted = len(jobs)
	m.QueueHours, m.FirstStartQueueHours = map[string]Percentiles{}, map[string]Percentiles{}
	for _, c := range SizeClasses {
		m.QueueHours[c] = percentiles(m.queue[c])
		m.FirstStartQueueHours[c] = percentiles(m.firstQueue[c])
	}
	m.SimulatedHours = end / 3600
	m.WallSeconds = time.Since(wall).Seconds()
	return m
}

// replays reports whether the relaxation rows replay j: every job
// submitted by the horizon (a job at the horizon itself counts).
func (w *Workload) replays(j *JobSpec) bool { return w.Horizon <= 0 || j.Submit <= w.Horizon }

// classIndex is c's position in SizeClasses: a bit of boundJob.classes.
func classIndex(c string) int {
	i := slices.Index(SizeClasses, c)
	if i < 0 || i >= 8 {
		panic("sim: size class " + c + " has no bit in boundJob.classes")
	}
	return i
}

// boundJob is one training job as the relaxations see it: times in
// seconds, GPUs in thousandths (shares add up exactly; in floats, three
// shares and a 7-GPU job on 8 GPUs left 6.999... free and the job
// waiting).
type boundJob struct {
	submit, work float64
	milli        int64
	min          int64 // an elastic job's least milli-GPUs; 0 for a rigid job
	priority     int
	seq          int   // submit order
	classes      uint8 // bit i: the job is in SizeClasses[i]
}

// The replays' orders; ties go by submit order.
func byPriority(a, b *boundRun) bool { return cmpOr(-a.priority, -b.priority, a.seq, b.seq) }
func bySize(a, b *boundRun) bool     { return cmpOr(a.milli, b.milli, a.seq, b.seq) }
func byWork(a, b *boundRun) bool     { return cmpOr(a.work, b.work, a.seq, b.seq) }

// bySLO is fluid-slo's order: the SLO class's jobs that have waited
// SLOPromote, then the large jobs, then the SLO class's other jobs, each
// tier by priority. It depends on how long a job has waited, so a replay
// in it re-sorts at every step.
func bySLO(a, b *boundRun) bool {
	if ta, tb := sloTier(a), sloTier(b); ta != tb {
		return ta < tb
	}
	return byPriority(a, b)
}

// sloTier is a job's tier in bySLO.
func sloTier(a *boundRun) int {
	switch {
	case a.milli >= sloMilli:
		return 1
	case a.waited >= SLOPromote.Seconds()-1e-6:
		return 0
	}
	return 2
}

// sloMilli is §1's SLO class bound as berth's core defaults it (jobs
// under it are the class), in milli-GPUs.
var sloMilli = int64(sched.Config{}.WithDefaults().SLO.MaxGPUs) * 1000

func cmpOr[T cmp.Ordered](a, b T, seqA, seqB int) bool {
	if a != b {
		return a < b
	}
	return seqA < seqB
}

// lower reports whether a class's queue times a are better than b's for
// the bound: the lower p90 (the figure targets are set on), then the
// lower mean.
func lower(a, b Percentiles) bool {
	if a.P90 != b.P90 {
		return a.P90 < b.P90
	}
	return a.Mean < b.Mean
}

// capStep is a change of inference's milli-GPUs at a time in seconds.
type capStep struct {
	at    float64
	delta int64
}

// toMilli is GPUs in thousandths, as shares are declared.
func toMilli(gpus float64) int64 { return int64(math.Round(gpus * 1000)) }

// inferenceSteps is inference's GPUs over time as the engine wants them:
// each service's min_replicas from the start, then its demand clamped to
// [min, max] replicas.
func inferenceSteps(w *Workload) (base int64, steps []capStep) {
	for _, s := range w.Services {
		g := toMilli(shapeGPUs(s.Shape))
		clamp := func(n int) int { return min(max(n, s.Min), s.Max) }
		cur := clamp(0)
		base += int64(cur) * g
		for _, d := range s.Demand {
			next := clamp(d.Replicas)
			if next != cur {
				steps = append(steps, capStep{at: d.At.Seconds(), delta: int64(next-cur) * g})
				cur = next
			}
		}
	}
	sort.SliceStable(steps, func(a, b int) bool { return steps[a].at < steps[b].at })
	return base, steps
}

// boundReplay is one replay on the fluid pool.
type boundReplay struct {
	jobs      []boundJob // in submit order
	steps     []capStep
	milli     int64   // the fleet's GPUs, in thousandths
	inference int64   // inference's now
	horizon   float64 // seconds; 0 runs until every job is done
	scaling   float64
	keep      uint8 // the classes whose queue times this replay reports
	order     ranking

	queue, first map[string][]float64 // hours, as Metrics keeps them

	t      float64
	active []*boundRun // arrived and not done, in the replay's order
}

type boundRun struct {
	*boundJob
	left   float64 // seconds of work at full size still to do
	waited float64
	rate   float64 // speed in the current step; 0 while waiting
	seen   bool    // has run at some point
	late   bool    // fluid-match: waited past its deadline
}

func (r *boundReplay) run() {
	next, step := 0, 0
	for {
		soonest := r.place()
		if next < len(r.jobs) {
			soonest = min(soonest, r.jobs[next].submit)
		}
		if step < len(r.steps) {
			soonest = min(soonest, r.steps[step].at)
		}
		if r.horizon > 0 {
			soonest = min(soonest, r.horizon)
		}
		if math.IsInf(soonest, 1) {
			break // nothing runs and nothing will change: what waits, waits for ever
		}
		r.advance(soonest)
		// Arrivals at the horizon itself count, with no wait, as the
		// engine's do (it handles events at the horizon, not after).
		for next < len(r.jobs) && r.jobs[next].submit <= r.t {
			j := &r.jobs[next]
			a := &boundRun{boundJob: j, left: j.work}
			at := sort.Search(len(r.active), func(i int) bool { return r.order.less(a, r.active[i]) })
			r.active = slices.Insert(r.active, at, a)
			next++
		}
		for step < len(r.steps) && r.steps[step].at <= r.t {
			r.inference += r.steps[step].delta
			step++
		}
		if r.horizon > 0 && r.t >= r.horizon {
			break
		}
	}
	for _, a := range r.active {
		r.record(r.queue, a.classes, a.waited)
		if !a.seen {
			r.record(r.first, a.classes, r.t-a.submit)
		}
	}
}

// record adds a wait in seconds to each of the replay's classes the job is
// in.
func (r *boundReplay) record(to map[string][]float64, classes uint8, wait float64) {
	for i, c := range SizeClasses {
		if classes&r.keep&(1<<i) != 0 {
			to[c] = append(to[c], wait/3600)
		}
	}
}

// place gives the free GPUs to the active jobs in the replay's order,
// each that fits at its size (or an elastic one at what is left, down to
// its minimum), and returns when the next thing it knows of happens: a
// running job finishes, or the order may change (ranking.wake).
func (r *boundReplay) place() float64 {
	free := max(r.milli-r.inference, 0)
	soonest := math.Inf(1)
	if r.order.mark != nil {
		r.order.mark(r)
	}
	if r.order.wake != nil {
		// Waits changed the order: sort again.
		slices.SortStableFunc(r.active, func(a, b *boundRun) int {
			if r.order.less(a, b) {
				return -1
			}
			if r.order.less(b, a) {
				return 1
			}
			return 0
		})
	}
	for _, a := range r.active {
		n, fits := int64(0), false
		switch {
		case a.milli <= free:
			n, fits = a.milli, true
		case a.min > 0 && free/1000*1000 >= a.min:
			n, fits = free/1000*1000, true // whole GPUs
		}
		a.rate = 0
		if !fits {
			continue
		}
		free -= n
		a.rate = 1
		if n < a.milli {
			a.rate = math.Pow(float64(n)/float64(a.milli), r.scaling)
		}
		if !a.seen {
			a.seen = true
			r.record(r.first, a.classes, r.t-a.submit)
		}
		soonest = min(soonest, r.t+a.left/a.rate)
	}
	if r.order.wake != nil {
		soonest = min(soonest, r.order.wake(r))
	}
	return soonest
}

// promoted is fluid-slo's wake: when the next waiting job of the SLO
// class is promoted.
func promoted(r *boundReplay) float64 {
	soonest := math.Inf(1)
	for _, a := range r.active {
		if a.rate == 0 && a.milli < sloMilli && a.waited < SLOPromote.Seconds()-1e-6 {
			soonest = min(soonest, r.t+SLOPromote.Seconds()-a.waited)
		}
	}
	return soonest
}

// advance moves the clock to t: running jobs work, the others wait, and
// those whose work is done leave with their queue time.
func (r *boundReplay) advance(t float64) {
	dt := t - r.t
	r.t = t
	keep := r.active[:0]
	for _, a := range r.active {
		if a.rate == 0 {
			a.waited += dt
		} else if a.left -= a.rate * dt; a.left <= 1e-6*max(1, a.work) {
			r.record(r.queue, a.classes, a.waited)
			continue
		}
		keep = append(keep, a)
	}
	clear(r.active[len(keep):])
	r.active = keep
}
