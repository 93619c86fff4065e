package api

import (
	"strings"

	"github.com/berthsched/berth/internal/model"
)

// ReplicaShape is one replica's GPUs and topology.
type ReplicaShape struct {
	GPUs     int `json:"gpus"`
	GPUMilli int `json:"gpu_milli,omitempty"` // a share of one GPU (1-999)
	// MIGProfile, with GPUMilli, asks for a MIG instance of that profile.
	MIGProfile string `json:"mig_profile,omitempty"`
	Topology   string `json:"topology"`
	GPUModel   string `json:"gpu_model,omitempty"`
	CPUMilli   int64  `json:"cpu_milli,omitempty"`
	MemoryMiB  int64  `json:"memory_mib,omitempty"`
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
	if err := CheckText("model", r.Model, 253); err != nil {
		return model.Deployment{}, err
	}
	if r.Name == "" && r.Model != "" {
		// §3's request names only the model: the name (the id in every
		// path) is derived from it.
		r.Name = DeriveName(r.Model)
		if CheckName("name", r.Name, true) != nil {
			return model.Deployment{}, Invalid("name", "required: model %s gives no usable name; set name", Quote(r.Model))
		}
	}
	if r.Name == "" {
		return model.Deployment{}, Invalid("name", "required (or a model to derive it from)")
	}
	if err := CheckName("name", r.Name, true); err != nil {
		return model.Deployment{}, err
	}
	if r.Team != "" {
		if err := CheckTeam("team", r.Team); err != nil {
			return model.Deployment{}, err
		}
	}
	if err := CheckText("replica_shape.gpu_model", r.ReplicaShape.GPUModel, MaxNameLen); err != nil {
		return model.Deployment{}, err
	}
	if r.MaxReplicas > MaxReplicas || r.MinReplicas > MaxReplicas {
		return model.Deployment{}, Invalid("max_replicas", "%d: at most %d (and at most what this cluster can hold)", max(r.MaxReplicas, r.MinReplicas), MaxReplicas)
	}
	if r.Desired != nil && (*r.Desired < 0 || *r.Desired > MaxReplicas) {
		return model.Deployment{}, Invalid("desired_replicas", "%d: expected 0 to %d", *r.Desired, MaxReplicas)
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
			GPUMilli: r.ReplicaShape.GPUMilli, MIGProfile: r.ReplicaShape.MIGProfile}}
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

// MaxReplicas bounds replica counts before the cluster's own bound
// (replicas × shape ≤ the fleet, checked at admission) applies.
const MaxReplicas = 1_000_000

// CheckTeam checks a team as a deployment or token names it: team, or
// org/team.
func CheckTeam(field, t string) *Error {
	if strings.Count(t, "/") > 1 {
		return Invalid(field, "%s: expected team or org/team", Quote(t))
	}
	return CheckScope(field, t)
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
	if *r.Desired < 0 || *r.Desired > MaxReplicas {
		return Invalid("desired_replicas", "%d: expected 0 to %d (berth clamps it into [min_replicas, max_replicas])", *r.Desired, MaxReplicas)
	}
	return nil
}

// Deployment is GET /v1/deployments/{id}: desired and actual replicas.
type Deployment struct {
	model.Deployment
	// Target is desired clamped into [min, max]: what berth reconciles to.
	Target int `json:"target_replicas"`
	Actual int `json:"actual_replicas"`
	// Standby counts the replicas kept beyond the target (the server's
	// standby_replicas setting): warm for the next scale-up.
	Standby int `json:"standby_replicas"`
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
