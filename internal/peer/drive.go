package peer

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/sim"
)

// System is one live scheduler under the harness.
type System interface {
	Name() string
	// Submit hands the system one training job now.
	Submit(ctx context.Context, j *sim.JobSpec) error
	// Scale sets a service's wanted replicas now (the first call creates
	// it).
	Scale(ctx context.Context, s *sim.ServiceSpec, replicas int) error
	// Poll reports what the system is doing now.
	Poll(ctx context.Context) (Snapshot, error)
}

// Snapshot is one poll of a system.
type Snapshot struct {
	// Jobs by workload job ID; a job not listed is not yet submitted.
	Jobs map[string]JobView
	// Replicas are each service's running replicas.
	Replicas map[string]int
	// Largest is largest_placeable computed the same way for both (the
	// core's own function over what the system reports allocated).
	Largest       sched.Largest
	FreeNodes     int // nodes with every GPU free
	AllocatedGPUs int
}

// JobView is one job as a poll saw it.
type JobView struct {
	State JobState
	// Nodes the current run holds (while running).
	Nodes []string
	// Placement is where the current run's GPUs are, node:indices
	// ("n002:0-1 n003:0-7"), as the system reports it.
	Placement string
	// Restarts is the system's own count of the job's preemptions (a
	// preemption and restart between two polls is still counted).
	Restarts int
}

// JobState is what the harness tells apart.
type JobState int

const (
	Pending JobState = iota
	Running
	Done
	Failed
)

func (s JobState) String() string {
	return [...]string{"pending", "running", "done", "failed"}[s]
}

// Options are the replay's knobs.
type Options struct {
	// Compression is simulated seconds per real second.
	Compression float64
	// Poll is the real interval between polls.
	Poll time.Duration
	// Horizon caps the simulated time replayed (0: the workload's).
	Horizon time.Duration
	Logger  *slog.Logger
}

// Real is how long simulated d takes at the compression.
func (o Options) Real(d time.Duration) time.Duration {
	return time.Duration(float64(d) / o.Compression)
}

// Run is what the driver recorded of one system.
type Run struct {
	System  string
	GPUs    int
	Horizon time.Duration // simulated
	Jobs    []*JobRecord
	Series  []Point
	// Services' demand and what ran, replica-seconds (simulated).
	DemandReplicaSeconds, ShortReplicaSeconds float64
	// Errors the system returned to submits or scales (counted, the first
	// few kept): a system that refuses work is visible, not silent.
	Errors    int
	FirstErrs []string
	// PollLagMax is the slowest poll (real): the harness's own resolution.
	PollLagMax time.Duration
}

// JobRecord is one job's life as polls saw it, in simulated time from
// the start of the replay.
type JobRecord struct {
	Spec        *sim.JobSpec
	Submitted   time.Duration
	Runs        []Span
	Preemptions int
	State       JobState
	pendingFrom time.Duration
	Waited      time.Duration
	// transitions counts running→pending seen by polls; restarts is the
	// system's own count as last seen. Preemptions is the larger: Slurm
	// bumps its count while the job still shows COMPLETING, so the two
	// describe one requeue, and a requeue and restart between two polls
	// shows only in the system's count.
	transitions, restarts int
	refused               bool
}

// Span is one run of a job.
type Span struct {
	Start, End time.Duration
	Nodes      []string
	Placement  string
}

// Point is one poll in simulated hours.
type Point struct {
	Hours         float64
	Largest       sched.Largest
	FreeNodes     int
	AllocatedGPUs int
	Pending       int
	Short         int // replicas short of demand, all services
}

// Drive replays w through sys in compressed real time and records what
// it saw at every poll.
func Drive(ctx context.Context, sys System, w *sim.Workload, opt Options) (*Run, error) {
	if opt.Compression <= 0 {
		return nil, fmt.Errorf("--compression: %g: expected a positive number", opt.Compression)
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	horizon := w.Horizon
	if opt.Horizon > 0 && opt.Horizon < horizon {
		horizon = opt.Horizon
	}
	jobs := Jobs(w, horizon)
	type scale struct {
		at  time.Duration
		svc *sim.ServiceSpec
		n   int
	}
	var scales []scale
	for i := range w.Services {
		s := &w.Services[i]
		for _, d := range s.Demand {
			if d.At < horizon {
				scales = append(scales, scale{d.At, s, d.Replicas})
			}
		}
	}
	sort.SliceStable(scales, func(a, b int) bool { return scales[a].at < scales[b].at })
	r := &Run{System: sys.Name(), Horizon: horizon}
	for _, n := range w.Nodes {
		r.GPUs += n.GPUs
	}
	demand := map[string]int{}
	fail := func(what string, err error) {
		r.Errors++
		if len(r.FirstErrs) < 5 {
			r.FirstErrs = append(r.FirstErrs, fmt.Sprintf("%s: %v", what, err))
		}
		opt.Logger.Warn("peer", "system", sys.Name(), "what", what, "err", err)
	}
	start := time.Now()
	clock := func() time.Duration { return time.Duration(float64(time.Since(start)) * opt.Compression) }
	nextJob, nextScale := 0, 0
	var last time.Duration
	byID := map[string]*JobRecord{}
	for {
		now := clock()
		for ; nextScale < len(scales) && scales[nextScale].at <= now; nextScale++ {
			sc := scales[nextScale]
			demand[sc.svc.ID] = sc.n
			if err := sys.Scale(ctx, sc.svc, sc.n); err != nil {
				fail("scale "+sc.svc.ID, err)
			}
		}
		for ; nextJob < len(jobs) && jobs[nextJob].Submit <= now; nextJob++ {
			j := jobs[nextJob]
			// Each job's wait starts when its own submit is made, not when
			// the burst it came in began.
			at := clock()
			rec := &JobRecord{Spec: j, Submitted: at, pendingFrom: at}
			if err := sys.Submit(ctx, j); err != nil {
				fail("submit "+j.ID, err)
				rec.State, rec.refused = Failed, true
			}
			r.Jobs = append(r.Jobs, rec)
			byID[j.ID] = rec
		}
		began := time.Now()
		snap, err := sys.Poll(ctx)
		r.PollLagMax = max(r.PollLagMax, time.Since(began))
		now = min(clock(), horizon)
		if err != nil {
			fail("poll", err)
		} else {
			r.observe(snap, byID, demand, now, now-last)
			last = now
		}
		if now >= horizon {
			break
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(opt.Poll):
		}
	}
	for _, rec := range r.Jobs {
		if rec.State == Pending {
			rec.Waited += horizon - rec.pendingFrom
		}
		if rec.State == Running && len(rec.Runs) > 0 {
			rec.Runs[len(rec.Runs)-1].End = horizon
		}
	}
	return r, nil
}

// Jobs lists the workload's training jobs that arrive before horizon, in
// submit order.
func Jobs(w *sim.Workload, horizon time.Duration) []*sim.JobSpec {
	var out []*sim.JobSpec
	// A copy: the stream's jobs are appended, and w.Jobs is not ours.
	src := append([]sim.JobSpec(nil), w.Jobs...)
	if w.Stream != nil {
		s := w.Stream()
		for {
			j, ok := s.Next()
			if !ok || j.Submit >= horizon {
				break
			}
			src = append(src, j)
		}
	}
	for i := range src {
		if src[i].Submit < horizon {
			out = append(out, &src[i])
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Submit < out[b].Submit })
	return out
}

// observe folds one snapshot into the records: state changes become
// starts, ends and preemptions; the fleet's shape becomes a point.
func (r *Run) observe(s Snapshot, byID map[string]*JobRecord, demand map[string]int, now, dt time.Duration) {
	pending := 0
	for id, rec := range byID {
		v, ok := s.Jobs[id]
		if !ok || rec.State == Done || rec.State == Failed {
			if rec.State == Pending {
				pending++
			}
			continue
		}
		switch {
		case rec.State == Pending && v.State == Running:
			rec.Waited += now - rec.pendingFrom
			rec.Runs = append(rec.Runs, Span{Start: now, Nodes: v.Nodes, Placement: v.Placement})
		case rec.State == Running && v.State == Running && v.Restarts > rec.restarts && v.Placement != rec.Runs[len(rec.Runs)-1].Placement:
			// Requeued and started again elsewhere between two polls: a
			// new run. (The same placement is Slurm's COMPLETING tail of
			// the run being requeued, its count already bumped.)
			rec.Runs[len(rec.Runs)-1].End = now
			rec.Runs = append(rec.Runs, Span{Start: now, Nodes: v.Nodes, Placement: v.Placement})
		case rec.State == Running && v.State == Pending:
			rec.Runs[len(rec.Runs)-1].End = now
			rec.transitions++
			rec.pendingFrom = now
		case rec.State == Running && (v.State == Done || v.State == Failed):
			rec.Runs[len(rec.Runs)-1].End = now
		case rec.State == Pending && (v.State == Done || v.State == Failed):
			// Started and ended between two polls: a run shorter than a
			// tick, placed where the poll never saw.
			rec.Waited += now - rec.pendingFrom
			rec.Runs = append(rec.Runs, Span{Start: now, End: now})
		}
		rec.State = v.State
		rec.restarts = max(rec.restarts, v.Restarts)
		rec.Preemptions = max(rec.transitions, rec.restarts)
		if v.State == Pending {
			pending++
		}
	}
	short := 0
	for id, want := range demand {
		if got := s.Replicas[id]; got < want {
			short += want - got
			r.ShortReplicaSeconds += float64(want-got) * dt.Seconds()
		}
		r.DemandReplicaSeconds += float64(want) * dt.Seconds()
	}
	r.Series = append(r.Series, Point{Hours: now.Hours(), Largest: s.Largest, FreeNodes: s.FreeNodes,
		AllocatedGPUs: s.AllocatedGPUs, Pending: pending, Short: short})
}
