package model

import "time"

// OwnerKind says what kind of work holds an allocation. The kinds are not
// equal: inference is never preempted, training yields by a fixed order,
// backfill yields the moment the reservation it borrowed from fills.
type OwnerKind string

const (
	OwnerTraining  OwnerKind = "training"
	OwnerInference OwnerKind = "inference"
	OwnerBackfill  OwnerKind = "backfill"
)

// Allocation binds a set of GPUs on one node to one owner. A request that
// spans nodes holds one allocation per node.
type Allocation struct {
	ID     string  `json:"id"`
	NodeID string  `json:"node_id"`
	GPUs   GPUMask `json:"gpu_mask"`
	// GPUMilli is the share of its one GPU (1-999), 0 for whole GPUs.
	GPUMilli int `json:"gpu_milli,omitempty"`
	// MIGInstance is the MIG instance a share runs on, numbered from 1 in
	// its GPU's layout (Node.MIG); 0 when the GPU is not partitioned.
	MIGInstance int       `json:"mig_instance,omitempty"`
	CPUMilli    int64     `json:"cpu_milli"`
	MemoryMiB   int64     `json:"memory_mib"`
	OwnerKind   OwnerKind `json:"owner_kind"`
	OwnerID     string    `json:"owner_id"`
	// Replica numbers an inference deployment's replicas; 0 for jobs.
	Replica     int  `json:"replica,omitempty"`
	Preemptible bool `json:"preemptible"`
	// Borrowed marks capacity taken outside the owner's own pool or quota.
	// Borrowed capacity is always preemptible (R1, §4).
	Borrowed bool `json:"borrowed,omitempty"`
	// Reservation names the reservation a backfill allocation runs inside;
	// it yields the moment that reservation can complete (R2).
	Reservation string    `json:"reservation,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	// Stopping marks an allocation whose preemption is in flight: stop
	// requested, deadline StopDeadline. Its GPUs are still in use.
	Stopping     bool      `json:"stopping,omitempty"`
	StopDeadline time.Time `json:"stop_deadline,omitzero"`
	// StopAt is when the stop was asked for: a checkpoint killed at the
	// deadline wrote for at least StopDeadline − StopAt.
	StopAt time.Time `json:"stop_at,omitzero"`
	// Killing marks a stopping allocation whose deadline passed: the agent
	// is told to SIGKILL. The GPUs stay in use until it confirms the exit.
	Killing bool `json:"killing,omitempty"`
	// StopReason says why it is stopping: preempted, scale_down,
	// relocated, cancelled.
	StopReason string `json:"stop_reason,omitempty"`
}
