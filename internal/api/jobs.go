package api

import (
	"fmt"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// JobRequest is POST /v1/jobs.
type JobRequest struct {
	Name    string            `json:"name"`
	Org     string            `json:"org,omitempty"`
	Team    string            `json:"team,omitempty"`
	User    string            `json:"user,omitempty"`
	Command []string          `json:"command,omitempty"`
	Image   string            `json:"image,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	GPUs    int               `json:"gpus"`
	// GPUMilli, 1-999, asks for that share of one GPU instead (gpus 1):
	// placed in the sharing pool, run under MPS with that share.
	GPUMilli int `json:"gpu_milli,omitempty"`
	// MIGProfile, with GPUMilli, asks for a MIG instance of exactly that
	// profile ("3g.40gb").
	MIGProfile string `json:"mig_profile,omitempty"`
	// Topology is node, pod or any: a constraint, never a hint.
	Topology    string             `json:"topology"`
	GPUModel    string             `json:"gpu_model,omitempty"`
	CPUMilli    int64              `json:"cpu_milli,omitempty"`
	MemoryMiB   int64              `json:"memory_mib,omitempty"`
	Priority    int                `json:"priority,omitempty"`
	MaxRuntime  string             `json:"max_runtime,omitempty"`
	Checkpoint  *CheckpointRequest `json:"checkpoint,omitempty"`
	Preemptible bool               `json:"preemptible,omitempty"`
	// Elastic lets the job run between min_gpus and max_gpus (§9.4);
	// gpus may then be left 0 (it is max_gpus).
	Elastic *model.Elastic `json:"elastic,omitempty"`
}

// MaxElasticSizes bounds an elastic job's list of sizes.
const MaxElasticSizes = 64

// CheckpointRequest says where a job checkpoints and how big it is; the
// size sets its preemption deadline.
type CheckpointRequest struct {
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	Interval string `json:"interval,omitempty"`
}

// MaxPriority bounds priorities so aging arithmetic cannot overflow.
const MaxPriority = 1_000_000

// MaxCheckpointBytes bounds a declared checkpoint size (1 PiB): the
// deadline arithmetic (size / bandwidth × 3) stays far from overflow.
const MaxCheckpointBytes = 1 << 50

// CheckPath checks a path a workload will use: no NUL (it cannot name a
// file) and no unprintable characters, at most 4096 bytes.
func CheckPath(field, p string) *Error {
	return CheckText(field, p, 4096)
}

// Job validates the request and builds the job it asks for.
func (r *JobRequest) Job(id string) (model.Job, error) {
	if err := CheckName("name", r.Name, false); err != nil {
		return model.Job{}, err
	}
	for _, f := range []struct{ field, v string }{{"org", r.Org}, {"team", r.Team}, {"user", r.User}} {
		if f.v != "" {
			if err := CheckName(f.field, f.v, true); err != nil {
				return model.Job{}, err
			}
		}
	}
	if err := CheckText("gpu_model", r.GPUModel, MaxNameLen); err != nil {
		return model.Job{}, err
	}
	if r.Elastic != nil && r.GPUs == 0 {
		r.GPUs = r.Elastic.MaxGPUs
	}
	if r.Elastic != nil && len(r.Elastic.Sizes) > MaxElasticSizes {
		return model.Job{}, Invalid("elastic.sizes", "%d sizes: expected at most %d", len(r.Elastic.Sizes), MaxElasticSizes)
	}
	if r.GPUs < 1 {
		return model.Job{}, Invalid("gpus", "%d: must be at least 1", r.GPUs)
	}
	if r.Topology == "" {
		return model.Job{}, Invalid("topology", "required: one of node, pod, any")
	}
	topo, err := model.ParseTopology(r.Topology)
	if err != nil {
		return model.Job{}, Invalid("topology", "%q: expected one of node, pod, any", r.Topology)
	}
	if r.Priority < -MaxPriority || r.Priority > MaxPriority {
		return model.Job{}, Invalid("priority", "%d: expected between %d and %d", r.Priority, -MaxPriority, MaxPriority)
	}
	maxRun, err := duration("max_runtime", r.MaxRuntime)
	if err != nil {
		return model.Job{}, err
	}
	j := model.Job{ID: id, Name: r.Name, Org: r.Org, Team: r.Team, User: r.User, Priority: r.Priority,
		Preemptible: r.Preemptible, MaxRuntime: maxRun,
		Shape: model.Shape{GPUs: r.GPUs, Topology: topo, CPUMilli: r.CPUMilli, MemoryMiB: r.MemoryMiB, GPUMilli: r.GPUMilli,
			MIGProfile: r.MIGProfile}}
	if r.GPUModel != "" {
		j.Shape.Models = []string{r.GPUModel}
	}
	if e := r.Elastic; e != nil {
		j.Elastic = &model.Elastic{MinGPUs: e.MinGPUs, MaxGPUs: e.MaxGPUs, Sizes: append([]int(nil), e.Sizes...)}
	}
	if r.Team != "" && r.Org == "" {
		j.Org = "default"
	}
	if len(r.Command) > 0 || r.Image != "" || len(r.Env) > 0 {
		j.Workload = &model.Workload{Command: r.Command, Image: r.Image, Env: r.Env}
		if err := j.Workload.Validate(""); err != nil && (len(r.Command) > 0 || r.Image != "") {
			return model.Job{}, FromFieldError(err)
		}
	}
	if c := r.Checkpoint; c != nil {
		if c.Path == "" {
			return model.Job{}, Invalid("checkpoint.path", "required when checkpoint is given")
		}
		if err := CheckPath("checkpoint.path", c.Path); err != nil {
			return model.Job{}, err
		}
		if c.Bytes < 0 || c.Bytes > MaxCheckpointBytes {
			return model.Job{}, Invalid("checkpoint.bytes", "%d: expected 0 (the measured size) to %d (1 PiB)", c.Bytes, int64(MaxCheckpointBytes))
		}
		iv, err := duration("checkpoint.interval", c.Interval)
		if err != nil {
			return model.Job{}, err
		}
		j.Checkpoint = &model.Checkpoint{Path: c.Path, SizeBytes: c.Bytes, Interval: iv}
	}
	if r.Preemptible && (r.Checkpoint == nil || r.Checkpoint.Path == "") {
		// bytes may be left out: the deadline then uses the size its
		// checkpoints are measured at (R3).
		return model.Job{}, Invalid("checkpoint", "a preemptible job must declare its checkpoint (a path; bytes, or 0 to use the measured size)")
	}
	if err := j.Validate(); err != nil {
		return model.Job{}, jobFieldError(err)
	}
	if len(r.Command) == 0 && r.Image == "" {
		// Without a workload an allocation would hold its GPUs with
		// nothing running until cancelled.
		return model.Job{}, Invalid("command", "set command (the program and its arguments) or image: the job needs something to run")
	}
	return j, nil
}

// jobFieldError maps the model's field names onto the request's.
func jobFieldError(err error) error {
	e := FromFieldError(err)
	switch e.Field {
	case "shape.gpus":
		e.Field = "gpus"
	case "shape.topology":
		e.Field = "topology"
	case "shape.models", "shape.models[0]":
		e.Field = "gpu_model"
	case "shape.cpu_milli":
		e.Field = "cpu_milli"
	case "shape.memory_mib":
		e.Field = "memory_mib"
	case "checkpoint.size_bytes":
		e.Field = "checkpoint.bytes"
	case "shape.gpu_milli", "elastic.gpu_milli":
		e.Field = "gpu_milli"
	case "shape.mig_profile":
		e.Field = "mig_profile"
	case "elastic.gpus":
		e.Field = "gpus"
	case "elastic.topology":
		e.Field = "topology"
	}
	return e
}

func duration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, Invalid(field, "%q: expected a duration such as 90m or 72h", s)
	}
	if d < 0 {
		return 0, Invalid(field, "%q: must not be negative", s)
	}
	return d, nil
}

// JobAccepted is the 202 answer to a submit.
type JobAccepted struct {
	JobID         string         `json:"job_id"`
	State         model.JobState `json:"state"`
	QueuePosition int            `json:"queue_position"`
	// ETA is when the job is expected to start; null when unknown.
	ETA *time.Time `json:"eta"`
	// Created is false when an Idempotency-Key matched an earlier submit.
	Created bool `json:"created"`
}

// Priority is a pending job's effective priority with its parts.
type Priority struct {
	Base        int `json:"base"`
	Preemptions int `json:"preemptions"`
	Waiting     int `json:"waiting"`
	Effective   int `json:"effective"`
}

// Reason says why a job is pending.
type Reason struct {
	Code       string `json:"code"`
	Constraint string `json:"constraint,omitempty"`
	Message    string `json:"message"`
	BestGPUs   int    `json:"best_gpus"`
	BestAt     string `json:"best_at,omitempty"`
}

// Job is GET /v1/jobs/{id}.
type Job struct {
	model.Job
	Allocations   []model.Allocation `json:"allocations,omitempty"`
	PendingReason *Reason            `json:"pending_reason,omitempty"`
	EffectivePrio *Priority          `json:"effective_priority,omitempty"`
	QueuePosition int                `json:"queue_position,omitempty"`
	ETA           *time.Time         `json:"eta,omitzero"`
	Reservation   *ReservationView   `json:"reservation,omitempty"`
	// Compacted: the job finished longer ago than the server's job
	// retention and is read from its usage record (no events, no
	// workload, no allocations).
	Compacted bool `json:"compacted,omitempty"`
}

// ReservationView is the reservation a pending job holds.
type ReservationView struct {
	At       string     `json:"at"`
	HeldGPUs int        `json:"held_gpus"`
	GPUs     int        `json:"gpus"`
	Waits    []string   `json:"waits,omitempty"`
	Backfill []string   `json:"backfill,omitempty"`
	ETA      *time.Time `json:"eta,omitzero"`
}

// JobList is GET /v1/jobs: one page, in submit order. Continue, when
// set, is the token that asks for the next page (`continue=`); absent,
// this was the last.
type JobList struct {
	Jobs     []Job  `json:"jobs"`
	Continue string `json:"continue,omitempty"`
}

// String is for logs.
func (r *JobRequest) String() string {
	return fmt.Sprintf("%s (%d GPUs, %s)", r.Name, r.GPUs, r.Topology)
}
