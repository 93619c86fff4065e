package model

import (
	"fmt"
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
}

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
	if s.CPUMilli < 0 {
		return fmt.Errorf("%scpu_milli: %d must not be negative", prefix, s.CPUMilli)
	}
	if s.MemoryMiB < 0 {
		return fmt.Errorf("%smemory_mib: %d must not be negative", prefix, s.MemoryMiB)
	}
	for i, m := range s.Models {
		if m == "" {
			return fmt.Errorf("%smodels[%d]: must not be empty", prefix, i)
		}
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

// Job is a training job: gang-scheduled, all GPUs or none.
type Job struct {
	ID          string        `json:"id"`
	Team        string        `json:"team,omitempty"`
	Shape       Shape         `json:"shape"`
	Priority    int           `json:"priority"`
	Preemptible bool          `json:"preemptible"`
	MaxRuntime  time.Duration `json:"max_runtime,omitempty"`
	State       JobState      `json:"state"`
	SubmittedAt time.Time     `json:"submitted_at"`
}

// Request returns the placement request for the job.
func (j *Job) Request() Request {
	return Request{Shape: j.Shape, Kind: OwnerTraining, OwnerID: j.ID, Priority: j.Priority, Preemptible: j.Preemptible}
}

// Deployment is an inference service: replicas of one shape, scaled by a
// single desired count inside a [Min, Max] band (§3).
type Deployment struct {
	ID           string `json:"id"`
	Model        string `json:"model,omitempty"` // the served model, not the GPU model
	ReplicaShape Shape  `json:"replica_shape"`
	MinReplicas  int    `json:"min_replicas"`
	MaxReplicas  int    `json:"max_replicas"`
	Desired      int    `json:"desired_replicas"`
	Priority     int    `json:"priority"`
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
