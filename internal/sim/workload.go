package sim

import (
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Workload is a fleet and what is asked of it over time. Times are offsets
// from the start of the simulation.
type Workload struct {
	Name  string
	Nodes []model.Node
	Jobs  []JobSpec // sorted by Submit
	// Stream, when set, is used instead of Jobs: each call starts the same
	// sequence anew and generates it as the run goes, so memory does not
	// grow with the length of the run.
	Stream   func() JobSource
	Services []ServiceSpec
	// Notes are assumptions the report must state (for example how a
	// trace's fields were mapped).
	Notes []string
	// Horizon ends the simulation; zero (traces) runs until every job is
	// done and every service gone.
	Horizon time.Duration
	// Storage is the checkpoint storage every preemption writes to.
	Storage StorageSpec
	// SmallPoolNodes is the operator's size for the small pool (R1) when
	// berth runs shape pools: how many nodes take ≤4-GPU work.
	SmallPoolNodes int
}

// StorageSpec is the cluster's checkpoint storage: one bandwidth shared by
// every checkpoint written at once, and episodes when it degrades.
type StorageSpec struct {
	// Bandwidth in bytes/s; zero takes Options.StorageBandwidth.
	Bandwidth float64
	Episodes  []Degradation // sorted by At, not overlapping
}

// Degradation is a span in which storage delivers Factor of its bandwidth.
type Degradation struct {
	At, Until time.Duration
	Factor    float64
}

// span is how long the workload asks for: the horizon, or for a trace the
// last submit + work or demand change.
func (w *Workload) span() time.Duration {
	if w.Horizon > 0 {
		return w.Horizon
	}
	var end time.Duration
	w.eachJob(func(j *JobSpec) { end = max(end, j.Submit+j.Work) })
	for _, s := range w.Services {
		for _, d := range s.Demand {
			end = max(end, d.At)
		}
	}
	return end
}

// JobSource yields jobs in submit order.
type JobSource interface {
	Next() (JobSpec, bool)
}

type sliceSource struct {
	jobs []JobSpec
	i    int
}

func (s *sliceSource) Next() (JobSpec, bool) {
	if s.i == len(s.jobs) {
		return JobSpec{}, false
	}
	s.i++
	return s.jobs[s.i-1], true
}

// source starts the workload's jobs from the beginning.
func (w *Workload) source() JobSource {
	if w.Stream != nil {
		return w.Stream()
	}
	return &sliceSource{jobs: w.Jobs}
}

// eachJob visits every job once, generating a stream anew if need be.
func (w *Workload) eachJob(f func(j *JobSpec)) {
	src := w.source()
	for j, ok := src.Next(); ok; j, ok = src.Next() {
		f(&j)
	}
}

// JobSpec is one training job (or notebook) as submitted.
type JobSpec struct {
	ID     string
	Submit time.Duration
	// Work is how long the job runs on a well-placed set of GPUs.
	Work        time.Duration
	Shape       model.Shape
	Team        string
	Priority    int
	Preemptible bool
	// CheckpointBytes is the job's full training state (R3).
	CheckpointBytes int64
	// MaxRuntime is what the job declares (for backfill); zero if none.
	MaxRuntime time.Duration
	// DurableEvery is how often the job writes a durable checkpoint while
	// it runs (R3); a preemption that misses its deadline is a kill that
	// loses the progress since the last one. Zero takes 45 minutes.
	DurableEvery time.Duration
	// Elastic, when set, lets the job run between its min and max
	// (Shape.GPUs is the max; Work is measured there). Policies that
	// cannot resize run it rigid at its max.
	Elastic *model.Elastic
}

// DefaultDurableEvery is R3's interval of durable checkpoints.
const DefaultDurableEvery = 45 * time.Minute

// ServiceSpec is an inference deployment whose wanted replica count
// follows Demand.
type ServiceSpec struct {
	ID       string
	Shape    model.Shape
	Min, Max int
	Priority int
	Demand   []DemandPoint // sorted by At
	// Load is how long a replica takes from placement to ready (model
	// load), drawn uniformly from [Load[0], Load[1]] at every start and
	// relocation. Capacity counts only ready replicas.
	Load [2]time.Duration
}

// DemandPoint sets a service's wanted replicas from At on.
type DemandPoint struct {
	At       time.Duration
	Replicas int
}

// gpuHours sums what the workload asks for (work, not wall time).
func (w *Workload) gpuHours() (training, inference float64) {
	w.eachJob(func(j *JobSpec) { training += shapeGPUs(j.Shape) * j.Work.Hours() })
	end := w.span()
	for _, s := range w.Services {
		for i, d := range s.Demand {
			until := end
			if i+1 < len(s.Demand) {
				until = s.Demand[i+1].At
			}
			if until > d.At {
				inference += float64(d.Replicas) * shapeGPUs(s.Shape) * (until - d.At).Hours()
			}
		}
	}
	return training, inference
}

// Node is the fleet's node type, for callers that build fleets.
type Node = model.Node

// Trim ends the workload after days (0 keeps it whole).
func (w *Workload) Trim(days float64) {
	if days <= 0 {
		return
	}
	if h := time.Duration(days * 24 * float64(time.Hour)); w.Horizon == 0 || h < w.Horizon {
		w.Horizon = h
	}
}
