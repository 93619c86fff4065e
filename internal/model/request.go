package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Shape is what one placement needs: a GPU count under a topology
// constraint, optionally limited to some GPU models, with CPU and memory.
// CPU and memory are totals for the shape; a shape that spans nodes takes
// them from each node in proportion to the GPUs it takes there (rounded up),
// because that is how a data-parallel gang's host-side work divides.
type Shape struct {
	GPUs     int      `json:"gpus"`
	Topology Topology `json:"topology"`
	// Models lists acceptable GPU models; empty accepts any model.
	Models    []string `json:"models,omitempty"`
	CPUMilli  int64    `json:"cpu_milli,omitempty"`
	MemoryMiB int64    `json:"memory_mib,omitempty"`
	// GPUMilli, 1-999, asks for that share of one GPU (GPUs is then 1),
	// placed only in the sharing pool; 0 means whole GPUs.
	GPUMilli int `json:"gpu_milli,omitempty"`
	// MIGProfile, with GPUMilli, asks for a MIG instance of exactly this
	// profile ("3g.40gb"), as a Kubernetes pod asking for
	// nvidia.com/mig-3g.40gb does; empty takes the smallest free instance
	// that holds GPUMilli, whatever its name.
	MIGProfile string `json:"mig_profile,omitempty"`
	// Worker is how many GPUs each of the job's processes needs on one
	// node: every part of a placement is a multiple of it. A Kubernetes
	// pod sits on one node, so a group of 2-GPU pods must get its GPUs in
	// pairs. 0 is 1 (any split). GPUs must be a multiple of it.
	Worker int `json:"worker,omitempty"`
}

// Unit is the granularity of a placement's parts: Worker, or 1.
func (s *Shape) Unit() int { return max(s.Worker, 1) }

// Fraction reports whether the shape is a share of one GPU.
func (s *Shape) Fraction() bool { return s.GPUMilli > 0 }

// AcceptsModel reports whether a GPU of the given model satisfies the shape.
func (s *Shape) AcceptsModel(model string) bool {
	if len(s.Models) == 0 {
		return true
	}
	for _, m := range s.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Validate checks the shape's fields; prefix names the enclosing field.
// MaxCPUMilli and MaxMemoryMiB bound a request's CPU and memory far above
// any machine and far below where arithmetic on them could overflow.
const (
	MaxCPUMilli  = 1_000_000_000
	MaxMemoryMiB = 1 << 30
)

func (s *Shape) Validate(prefix string) error {
	if s.GPUs < 1 {
		return fmt.Errorf("%sgpus: %d must be at least 1", prefix, s.GPUs)
	}
	if _, err := ParseTopology(string(s.Topology)); err != nil {
		return fmt.Errorf("%s%w", prefix, err)
	}
	if s.Topology == TopologyNode && s.GPUs > MaxGPUsPerNode {
		return fmt.Errorf("%sgpus: %d cannot fit topology node (at most %d GPUs per node)", prefix, s.GPUs, MaxGPUsPerNode)
	}
	if s.CPUMilli < 0 || s.CPUMilli > MaxCPUMilli {
		return fmt.Errorf("%scpu_milli: %d: expected 0 to %d (a million cores)", prefix, s.CPUMilli, int64(MaxCPUMilli))
	}
	if s.MemoryMiB < 0 || s.MemoryMiB > MaxMemoryMiB {
		return fmt.Errorf("%smemory_mib: %d: expected 0 to %d (1 PiB)", prefix, s.MemoryMiB, int64(MaxMemoryMiB))
	}
	if s.Worker < 0 || s.Worker > 0 && s.GPUs%s.Worker != 0 {
		return fmt.Errorf("%sworker: %d: expected 0 or a divisor of gpus (%d): each process's GPUs sit on one node", prefix, s.Worker, s.GPUs)
	}
	for i, m := range s.Models {
		if m == "" {
			return fmt.Errorf("%smodels[%d]: must not be empty", prefix, i)
		}
	}
	switch {
	case s.GPUMilli < 0 || s.GPUMilli > 999:
		return fmt.Errorf("%sgpu_milli: %d: expected 1 to 999 (a share of one GPU), or 0 for whole GPUs", prefix, s.GPUMilli)
	case s.GPUMilli > 0 && s.GPUs != 1:
		return fmt.Errorf("%sgpu_milli: a share of a GPU is a share of one: gpus must be 1, not %d", prefix, s.GPUs)
	case s.GPUMilli > 0 && s.Topology != TopologyNode:
		return fmt.Errorf("%stopology: a share of one GPU is placed on one node: expected node, not %s", prefix, s.Topology)
	case s.MIGProfile != "" && s.GPUMilli == 0:
		return fmt.Errorf("%smig_profile: %q: a MIG instance is a share of one GPU: gpu_milli must say its size (a 3g of 7 slices is 428)", prefix, s.MIGProfile)
	case len(s.MIGProfile) > 32 || strings.ContainsAny(s.MIGProfile, " \t\n,"):
		return fmt.Errorf("%smig_profile: %q: expected a profile name such as 3g.40gb", prefix, s.MIGProfile)
	}
	return nil
}

// Request is one thing to place: a shape plus who it is for.
type Request struct {
	Shape
	Kind    OwnerKind `json:"kind"`
	OwnerID string    `json:"owner_id"`
	Replica int       `json:"replica,omitempty"`
	// Priority orders requests of the same kind; higher goes first.
	Priority    int  `json:"priority"`
	Preemptible bool `json:"preemptible"`
}

// JobState is a training job's lifecycle state.
type JobState string

const (
	JobPending   JobState = "pending"
	JobRunning   JobState = "running"
	JobCompleted JobState = "completed"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// Checkpoint is where a preemptible job writes its state and how big that
// state is. The size sets the preemption deadline (R3): size / measured
// storage bandwidth × 3.
type Checkpoint struct {
	Path string `json:"path"`
	// SizeBytes may be left 0: the deadline then uses MeasuredBytes, the
	// size the job's last checkpoint was reported at (until one is, the
	// deadline's floor).
	SizeBytes     int64         `json:"size_bytes"`
	MeasuredBytes int64         `json:"measured_bytes,omitempty"`
	Interval      time.Duration `json:"interval,omitempty"`
}

// Bytes is the checkpoint size a deadline is set from: the declared size,
// else the last measured one.
func (c *Checkpoint) Bytes() int64 {
	if c.SizeBytes > 0 {
		return c.SizeBytes
	}
	return c.MeasuredBytes
}

// Job is a training job: gang-scheduled, all GPUs or none.
type Job struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Org, Team and User place the job in the quota tree: org, org/team,
	// org/team/user.
	Org         string        `json:"org,omitempty"`
	Team        string        `json:"team,omitempty"`
	User        string        `json:"user,omitempty"`
	Shape       Shape         `json:"shape"`
	Priority    int           `json:"priority"`
	Preemptible bool          `json:"preemptible"`
	Checkpoint  *Checkpoint   `json:"checkpoint,omitempty"`
	MaxRuntime  time.Duration `json:"max_runtime,omitempty"`
	State       JobState      `json:"state"`
	SubmittedAt time.Time     `json:"submitted_at"`
	// QueuedAt is when the job last entered the queue: its submission, or
	// its requeue after a preemption. Zero means SubmittedAt.
	QueuedAt time.Time `json:"queued_at,omitzero"`
	// StartedAt is when the current run began; the minimum runtime before
	// it may be preempted counts from here.
	StartedAt time.Time `json:"started_at,omitzero"`
	// RunRecord is what the job's runs left behind: nil until its first
	// run starts. Read it with Run, change it with EditRun.
	*RunRecord
	PreemptCount int `json:"preempt_count,omitempty"`
	// Workload is what the node agent runs; the scheduling core ignores it.
	Workload *Workload `json:"workload,omitempty"`
	// History is the job's recent lifecycle, newest last, capped.
	History []Event `json:"history,omitempty"`
	// FinishedAt is when the job reached a terminal state.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Owner is the principal that submitted the job.
	Owner string `json:"owner,omitempty"`
	// Elastic, when set, lets the job run at any allowed size between its
	// minimum and maximum (§9.4); Shape.GPUs is then the maximum.
	Elastic *Elastic `json:"elastic,omitempty"`
	// Size is the GPUs an elastic job runs at now (0 when not running).
	Size int `json:"size,omitempty"`
	// ResizeRecord is an elastic job's resizes: nil until its first.
	// Read it with Resizing; Resized records one.
	*ResizeRecord
}

// RunRecord is what a job's runs leave on it, kept behind a pointer
// because a pending job has none of it. At a million jobs in the table,
// most of them waiting, these fields and the resize record's were 128
// of a job's 528 bytes (576 with its allocation's size class), 160 MB
// in all that was zero; behind two pointers a job is 416. The fields
// are promoted, so the JSON is as it was; reading one through a nil
// record would panic, so code reads the copy Run returns. A job is
// often a shallow copy of a cached one that must not change: EditRun
// gives the job a record of its own before it is written.
type RunRecord struct {
	LastCheckpointAt time.Time `json:"last_checkpoint_at,omitzero"`
	// Restore is the last checkpoint the job wrote, handed to its next run.
	Restore string `json:"restore,omitempty"`
	// Ran lists the allocations of the job's latest run in gang order,
	// kept after it ends: `berth job logs` finds the nodes from it.
	Ran []AllocRef `json:"ran,omitempty"`
	// GPUSeconds and WaitSeconds add up, run by run, what the job held
	// and how long it waited: the usage record's figures.
	GPUSeconds  float64 `json:"gpu_seconds,omitempty"`
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
}

// Run returns a copy of the record, the zero one for nil: promoted to
// Job, j.Run() reads a job's record whether it has one or not.
func (r *RunRecord) Run() RunRecord {
	if r == nil {
		return RunRecord{}
	}
	return *r
}

// EditRun gives the job a run record of its own, a copy of the one it
// had, and returns it to be changed: the record a shallow copy of the
// job shared stays as it was.
func (j *Job) EditRun() *RunRecord {
	r := j.Run()
	r.Ran = slices.Clip(r.Ran) // an append copies, never writes the shared array
	j.RunRecord = &r
	return &r
}

// ResizeRecord is an elastic job's resizes: its last change, the recent
// ones and the count of all of them. Behind a pointer for the reason
// RunRecord is.
type ResizeRecord struct {
	ResizedAt   time.Time `json:"resized_at,omitzero"`
	Resizes     []Resize  `json:"resizes,omitempty"`
	ResizeCount int       `json:"resize_count,omitempty"`
}

// Resizing returns a copy of the record, the zero one for nil: promoted
// to Job, as RunRecord.Run is.
func (r *ResizeRecord) Resizing() ResizeRecord {
	if r == nil {
		return ResizeRecord{}
	}
	return *r
}

// Queued is when the job's current wait began.
func (j *Job) Queued() time.Time {
	if j.QueuedAt.IsZero() {
		return j.SubmittedAt
	}
	return j.QueuedAt
}

// Scopes lists the quota scopes the job counts against, widest first:
// org, org/team, org/team/user (only those its fields name).
func (j *Job) Scopes() []string {
	var out []string
	path := ""
	for _, part := range []string{j.Org, j.Team, j.User} {
		if part == "" {
			break
		}
		if path != "" {
			path += "/"
		}
		path += part
		out = append(out, path)
	}
	return out
}

// Validate checks the job's fields and names the first wrong one.
func (j *Job) Validate() error {
	if j.ID == "" {
		return fmt.Errorf("id: must not be empty")
	}
	if err := j.Shape.Validate("shape."); err != nil {
		return err
	}
	if j.MaxRuntime < 0 {
		return fmt.Errorf("max_runtime: %s must not be negative", j.MaxRuntime)
	}
	if j.Team == "" && j.User != "" {
		return fmt.Errorf("team: must be set when user is")
	}
	if j.Org == "" && j.Team != "" {
		return fmt.Errorf("org: must be set when team is")
	}
	if e := j.Elastic; e != nil {
		if err := e.Validate("elastic.", &j.Shape); err != nil {
			return err
		}
		if j.Checkpoint == nil || j.Checkpoint.Path == "" {
			return fmt.Errorf("checkpoint: an elastic job must declare one: every resize stops at a checkpoint and restores from it")
		}
	}
	if j.Preemptible {
		// The contract of the cluster (§7, R3): preemptible work must be
		// cheap to reclaim, so it must say where and how much it writes.
		switch {
		case j.Checkpoint == nil:
			return fmt.Errorf("checkpoint: a preemptible job must declare one (path, and size_bytes unless it is to be measured)")
		case j.Checkpoint.Path == "":
			return fmt.Errorf("checkpoint.path: a preemptible job must say where it checkpoints")
		case j.Checkpoint.SizeBytes < 0:
			return fmt.Errorf("checkpoint.size_bytes: %d must not be negative (0: the size its checkpoints are measured at)", j.Checkpoint.SizeBytes)
		}
	}
	return nil
}

// Request returns the placement request for the job.
// An elastic job asks for its minimum: it starts as soon as that fits.
func (j *Job) Request() Request {
	r := Request{Shape: j.Shape, Kind: OwnerTraining, OwnerID: j.ID, Priority: j.Priority, Preemptible: j.Preemptible}
	// Its CPU and memory are the minimum's share of the shape's, which
	// declares them for the maximum: at the whole, a 2-GPU part of an
	// 8-GPU job held all of the job's cores, and its growth asked for more.
	if j.Elastic != nil && j.Elastic.MinGPUs < j.Shape.GPUs {
		r.CPUMilli = Share(j.Shape.CPUMilli, j.Elastic.MinGPUs, j.Shape.GPUs)
		r.MemoryMiB = Share(j.Shape.MemoryMiB, j.Elastic.MinGPUs, j.Shape.GPUs)
		r.GPUs = j.Elastic.MinGPUs
	}
	return r
}

// Deployment is an inference service: replicas of one shape, scaled by a
// single desired count inside a [Min, Max] band (§3).
type Deployment struct {
	ID string `json:"id"`
	// UID is made at creation and never reused: a deployment deleted
	// and created again under the same name (the id) has a new one, so
	// what was bound to the old one (an autoscaler token) is not
	// inherited by the new.
	UID          string `json:"uid,omitempty"`
	Model        string `json:"model,omitempty"` // the served model, not the GPU model
	ReplicaShape Shape  `json:"replica_shape"`
	MinReplicas  int    `json:"min_replicas"`
	MaxReplicas  int    `json:"max_replicas"`
	Desired      int    `json:"desired_replicas"`
	Priority     int    `json:"priority"`
	// Team owns the deployment for tenancy; the core ignores it.
	Team      string    `json:"team,omitempty"`
	Workload  *Workload `json:"workload,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Accepted is an operator's decision, taken from an R6 page, to run
	// below target rather than preempt: kept in the table so that it
	// survives restarts and failovers. It holds while the target stays
	// at or below the Want it was taken for.
	Accepted *AcceptedDegraded `json:"accepted_degraded,omitempty"`
}

// AcceptedDegraded is the accept_degraded choice on a deployment's page.
type AcceptedDegraded struct {
	Want int       `json:"want_replicas"`
	Have int       `json:"have_replicas"`
	By   string    `json:"by"`
	At   time.Time `json:"at"`
}

// Validate checks the deployment's fields and names the first wrong one.
func (d *Deployment) Validate() error {
	switch {
	case d.ID == "":
		return fmt.Errorf("id: must not be empty")
	case d.MinReplicas < 0:
		return fmt.Errorf("min_replicas: %d must not be negative", d.MinReplicas)
	case d.MaxReplicas < d.MinReplicas:
		return fmt.Errorf("max_replicas: %d must be at least min_replicas (%d)", d.MaxReplicas, d.MinReplicas)
	case d.Desired < 0:
		return fmt.Errorf("desired_replicas: %d must not be negative", d.Desired)
	}
	return d.ReplicaShape.Validate("replica_shape.")
}

// Target is the replica count the scheduler reconciles toward: desired,
// clamped into [min, max].
func (d *Deployment) Target() int {
	t := d.Desired
	if t < d.MinReplicas {
		t = d.MinReplicas
	}
	if t > d.MaxReplicas {
		t = d.MaxReplicas
	}
	return t
}
