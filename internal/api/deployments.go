package api

import (
	"github.com/berthsched/berth/internal/model"
)

// ReplicaShape is one replica's GPUs and topology.
type ReplicaShape struct {
	GPUs      int    `json:"gpus"`
	GPUMilli  int    `json:"gpu_milli,omitempty"` // a share of one GPU (1-999)
	Topology  string `json:"topology"`
	GPUModel  string `json:"gpu_model,omitempty"`
	CPUMilli  int64  `json:"cpu_milli,omitempty"`
	MemoryMiB int64  `json:"memory_mib,omitempty"`
}

// DeploymentRequest is POST /v1/deployments.
type DeploymentRequest struct {
	Name         string            `json:"name"`
	Model        string            `json:"model"`
	Team         string            `json:"team,omitempty"`
	ReplicaShape ReplicaShape      `json:"replica_shape"`
	MinReplicas  int               `json:"min_replicas"`
	MaxReplicas  int               `json:"max_replicas"`
	Desired      *int              `json:"desired_replicas,omitempty"`
	Priority     int               `json:"priority,omitempty"`
	Command      []string          `json:"command,omitempty"`
	Image        string            `json:"image,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	// Readiness is the replica's readiness check (R4).
	Readiness *model.Readiness `json:"readiness,omitempty"`
}

// Deployment validates the request and builds the deployment. Its id is
// its name: names are unique.
func (r *DeploymentRequest) Deployment() (model.Deployment, error) {
	if r.Name == "" {
		return model.Deployment{}, Invalid("name", "required")
	}
	if !validName(r.Name) {
		return model.Deployment{}, Invalid("name", "%q: expected lowercase letters, digits, '-', '.', '_' (at most 63)", r.Name)
	}
	if r.ReplicaShape.Topology == "" {
		return model.Deployment{}, Invalid("replica_shape.topology", "required: one of node, pod, any")
	}
	topo, err := model.ParseTopology(r.ReplicaShape.Topology)
	if err != nil {
		return model.Deployment{}, Invalid("replica_shape.topology", "%q: expected one of node, pod, any", r.ReplicaShape.Topology)
	}
	if r.ReplicaShape.GPUs < 1 {
		return model.Deployment{}, Invalid("replica_shape.gpus", "%d: must be at least 1", r.ReplicaShape.GPUs)
	}
	if r.Priority < -MaxPriority || r.Priority > MaxPriority {
		return model.Deployment{}, Invalid("priority", "%d: expected between %d and %d", r.Priority, -MaxPriority, MaxPriority)
	}
	d := model.Deployment{ID: r.Name, Model: r.Model, Team: r.Team, MinReplicas: r.MinReplicas, MaxReplicas: r.MaxReplicas,
		Priority: r.Priority, Desired: r.MinReplicas,
		ReplicaShape: model.Shape{GPUs: r.ReplicaShape.GPUs, Topology: topo, CPUMilli: r.ReplicaShape.CPUMilli, MemoryMiB: r.ReplicaShape.MemoryMiB,
			GPUMilli: r.ReplicaShape.GPUMilli}}
	if r.ReplicaShape.GPUModel != "" {
		d.ReplicaShape.Models = []string{r.ReplicaShape.GPUModel}
	}
	if r.Desired != nil {
		d.Desired = *r.Desired
	}
	if r.Readiness != nil && len(r.Command) == 0 && r.Image == "" {
		return model.Deployment{}, Invalid("readiness", "a readiness check needs a workload to check: set command or image")
	}
	if len(r.Command) > 0 || r.Image != "" || len(r.Env) > 0 {
		d.Workload = &model.Workload{Command: r.Command, Image: r.Image, Env: r.Env, Readiness: r.Readiness}
		if err := d.Workload.Validate(""); err != nil {
			return model.Deployment{}, FromFieldError(err)
		}
	}
	if err := d.Validate(); err != nil {
		return model.Deployment{}, FromFieldError(err)
	}
	return d, nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// ScaleRequest is PATCH /v1/deployments/{id}: the autoscaler's only verb.
type ScaleRequest struct {
	Desired *int `json:"desired_replicas"`
}

// Validate checks the request.
func (r *ScaleRequest) Validate() error {
	if r.Desired == nil {
		return Invalid("desired_replicas", "required")
	}
	if *r.Desired < 0 {
		return Invalid("desired_replicas", "%d: must not be negative", *r.Desired)
	}
	return nil
}

// Deployment is GET /v1/deployments/{id}: desired and actual replicas.
type Deployment struct {
	model.Deployment
	// Target is desired clamped into [min, max]: what berth reconciles to.
	Target int `json:"target_replicas"`
	Actual int `json:"actual_replicas"`
	// Ready counts the replicas that serve: placed, and their readiness
	// check passing (R4). Capacity is this, not Actual.
	Ready    int     `json:"ready_replicas"`
	Stopping int     `json:"stopping_replicas"`
	Pending  *Reason `json:"pending_reason,omitempty"`
}

// DeploymentList is GET /v1/deployments.
type DeploymentList struct {
	Deployments []Deployment `json:"deployments"`
}
