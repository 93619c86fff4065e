package sched

import (
	"fmt"
	"strings"

	"github.com/berthsched/berth/internal/model"
)

// AdmissionError rejects a submission, naming the field at fault.
type AdmissionError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *AdmissionError) Error() string { return e.Field + ": " + e.Message }

// Admit checks a job at submission against what can never change by
// waiting: its own fields, the quota tree's caps, and the cluster's shape.
// A job that may fit later is admitted; one that can never fit is refused
// with the field and the reason. It does not look at current load.
func Admit(s State, j model.Job) error { return NewAdmitter(s).Admit(j) }

// Admitter answers Admit for one fleet and quota tree without rebuilding
// the empty-fleet index per call. It is not safe for concurrent use.
type Admitter struct {
	cfg    Config
	ix     *Index
	quotas *quotaBook
	// The largest node and pod and the whole fleet, in GPUs: what any
	// shape is bounded by before the pools and models are looked at.
	node, pod, fleet int
}

// NewAdmitter builds the admission view of a state's nodes and quotas.
func NewAdmitter(s State) *Admitter {
	cfg := s.Config.withDefaults()
	a := &Admitter{cfg: cfg, ix: NewIndex(allSchedulable(s.Nodes), nil, cfg), quotas: newQuotaBook(s.Quotas)}
	pods := map[string]int{}
	for _, n := range s.Nodes {
		a.node = max(a.node, n.GPUs)
		a.fleet += n.GPUs
		pods[n.Pod] += n.GPUs
	}
	for _, g := range pods {
		a.pod = max(a.pod, g)
	}
	return a
}

// Bound refuses a shape larger than this cluster could ever hold, citing
// the cluster's own largest node, pod or fleet (not the model's static
// limits, which are far larger).
func (a *Admitter) Bound(s *model.Shape, field string) error {
	if len(a.ix.nodes) == 0 || s.GPUs < 1 {
		return nil
	}
	switch {
	case s.Topology == model.TopologyNode && s.GPUs > a.node:
		return &AdmissionError{Field: field, Message: fmt.Sprintf("%d: can never be placed on this cluster: topology node needs them in one node; the largest node has %d GPUs", s.GPUs, a.node)}
	case s.Topology == model.TopologyPod && s.GPUs > a.pod:
		return &AdmissionError{Field: field, Message: fmt.Sprintf("%d: can never be placed on this cluster: topology pod needs them under one leaf switch; the largest pod has %d GPUs", s.GPUs, a.pod)}
	case s.GPUs > a.fleet:
		return &AdmissionError{Field: field, Message: fmt.Sprintf("%d: can never be placed on this cluster: it has %d GPUs", s.GPUs, a.fleet)}
	}
	return nil
}

// Admit is the package-level Admit on the admitter's state.
func (a *Admitter) Admit(j model.Job) error {
	if err := a.Bound(&j.Shape, "shape.gpus"); err != nil {
		return err
	}
	if err := j.Validate(); err != nil {
		return fieldError(err)
	}
	if err := a.quotas.neverFits(&j); err != nil {
		return err
	}
	req := j.Request()
	if _, why := a.ix.Place(&req, a.cfg.Pools); why != nil && why.Code == ReasonInfeasible {
		field := "shape.gpus"
		switch why.Constraint {
		case "models":
			field = "shape.models"
		case "cpu_milli", "memory_mib":
			field = "shape." + why.Constraint
		case "topology":
			field = "shape.topology"
		}
		return &AdmissionError{Field: field, Message: "can never be placed on this cluster: " + why.Message}
	}
	return nil
}

// AdmitDeployment is the package-level AdmitDeployment on the admitter's
// state.
func (a *Admitter) AdmitDeployment(d model.Deployment) error {
	if err := a.Bound(&d.ReplicaShape, "replica_shape.gpus"); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return fieldError(err)
	}
	if len(a.ix.nodes) > 0 {
		// Replicas × shape ≤ the fleet: a count no cluster this size
		// could run is refused, not carried through every pass.
		per := int64(d.ReplicaShape.GPUs) * 1000
		if d.ReplicaShape.GPUMilli > 0 {
			per = int64(d.ReplicaShape.GPUMilli)
		}
		if most := int64(a.fleet) * 1000 / per; int64(d.MaxReplicas) > most || int64(d.MinReplicas) > most {
			return &AdmissionError{Field: "max_replicas", Message: fmt.Sprintf("%d replicas: this cluster's %d GPUs hold at most %d replicas of this shape", max(d.MaxReplicas, d.MinReplicas), a.fleet, most)}
		}
	}
	req := model.Request{Shape: d.ReplicaShape, Kind: model.OwnerInference, OwnerID: d.ID}
	if _, why := a.ix.Place(&req, a.cfg.Pools); why != nil && why.Code == ReasonInfeasible {
		return &AdmissionError{Field: "replica_shape", Message: fmt.Sprintf("can never be placed on this cluster: %s", why.Message)}
	}
	return nil
}

// allSchedulable is the fleet as if every node were healthy and in
// service: admission asks whether the shape could ever fit, not whether it
// fits today.
func allSchedulable(nodes []model.Node) []model.Node {
	out := make([]model.Node, len(nodes))
	for i, n := range nodes {
		n.Health, n.Draining, n.Quarantined, n.QuarantinedGPUs = model.HealthHealthy, false, false, 0
		out[i] = n
	}
	return out
}

// fieldError splits a "field: message" validation error.
func fieldError(err error) *AdmissionError {
	field, msg, ok := strings.Cut(err.Error(), ": ")
	if !ok || strings.Contains(field, " ") {
		return &AdmissionError{Field: "job", Message: err.Error()}
	}
	return &AdmissionError{Field: field, Message: msg}
}

// AdmitDeployment checks a deployment the same way.
func AdmitDeployment(s State, d model.Deployment) error { return NewAdmitter(s).AdmitDeployment(d) }
