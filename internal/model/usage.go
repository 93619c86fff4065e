package model

import (
	"strings"
	"time"
)

// UsageRecord is one finished piece of GPU work, kept in the table for
// accounting (`berth usage`) after the job or the replica is gone: a
// finished job, or one inference replica's allocation. It is small on
// purpose (no workload, no history), and removed after the control
// plane's usage retention.
type UsageRecord struct {
	// ID is the job's id, or the replica allocation's.
	ID    string    `json:"id"`
	Kind  OwnerKind `json:"kind"` // training or inference
	Owner string    `json:"owner"`
	Name  string    `json:"name,omitempty"`
	Org   string    `json:"org,omitempty"`
	Team  string    `json:"team,omitempty"`
	User  string    `json:"user,omitempty"`
	GPUs  float64   `json:"gpus"`
	// Start is the job's submission (a replica's start); End its end.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// GPUSeconds is what it held: GPUs × the time each allocation lived.
	GPUSeconds float64 `json:"gpu_seconds"`
	// WaitSeconds is all the job's time pending: the first wait and each
	// after a requeue.
	WaitSeconds float64  `json:"wait_seconds,omitempty"`
	Preemptions int      `json:"preemptions,omitempty"`
	State       JobState `json:"state,omitempty"`
}

// UsageID is the record's key: its end first, so the table lists the
// oldest first.
func (r *UsageRecord) UsageID() string {
	return r.End.UTC().Format("20060102T150405.000") + "-" + r.ID
}

// TeamOf splits a deployment's team ("org/team", or "team" in the default
// org).
func TeamOf(scope string) (org, team string) {
	if o, t, ok := strings.Cut(scope, "/"); ok {
		return o, t
	}
	if scope == "" {
		return "", ""
	}
	return "default", scope
}
