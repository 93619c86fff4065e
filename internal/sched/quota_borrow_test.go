package sched

import (
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// MarkBorrowed admits running jobs in the order they started: in a team
// guaranteed 8 GPUs, the first 8-GPU job is within it and the second is
// borrowed; a job of another team is not.
func TestMarkBorrowed(t *testing.T) {
	job := func(id, team string, started int) *model.Job {
		return &model.Job{ID: id, Org: "ml", Team: team, State: model.JobRunning, Preemptible: true,
			StartedAt: benchNow.Add(time.Duration(started) * time.Minute), Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}}
	}
	alloc := func(id string) model.Allocation {
		return model.Allocation{ID: "a-" + id, NodeID: "n-" + id, GPUs: model.FullMask(8), OwnerKind: model.OwnerTraining, OwnerID: id}
	}
	s := State{Quotas: []model.Quota{{Scope: "ml/nlp", GuaranteedGPUs: 8}},
		Jobs:        []*model.Job{job("late", "nlp", 2), job("early", "nlp", 1), job("other", "vision", 3)},
		Allocations: []model.Allocation{alloc("late"), alloc("early"), alloc("other")}}
	MarkBorrowed(&s)
	got := map[string]bool{}
	for _, a := range s.Allocations {
		got[a.OwnerID] = a.Borrowed
	}
	if !got["late"] || got["early"] || got["other"] {
		t.Fatalf("borrowed %v, want only late", got)
	}
}
