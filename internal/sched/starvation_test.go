package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// TestStarvationMeansCannotHost: R2's alert is for a gang the cluster
// cannot host even with active preemption, not for a gang waiting its turn
// behind work it could preempt but the budget forbids right now.
func TestStarvationMeansCannotHost(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	state := func(blockerPreemptible bool) State {
		blocker := model.Job{ID: "blocker", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Priority: 0,
			Preemptible: blockerPreemptible, State: model.JobRunning, SubmittedAt: now.Add(-10 * time.Hour), StartedAt: now.Add(-9 * time.Hour)}
		if blockerPreemptible {
			blocker.Checkpoint = &model.Checkpoint{Path: "/c", SizeBytes: 1e9}
		}
		gang := model.Job{ID: "gang", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Priority: 50,
			Preemptible: true, Checkpoint: &model.Checkpoint{Path: "/c", SizeBytes: 1e9}, State: model.JobPending, SubmittedAt: now.Add(-5 * time.Hour)}
		return State{
			Nodes:       []model.Node{{ID: "n1", Pod: "p", Model: "H100", GPUs: 8, Health: model.HealthHealthy}},
			Allocations: []model.Allocation{{ID: "a1", NodeID: "n1", GPUs: model.FullMask(8), OwnerKind: model.OwnerTraining, OwnerID: "blocker", Preemptible: blockerPreemptible, CreatedAt: blocker.StartedAt}},
			Jobs:        JobsOf([]model.Job{blocker, gang}),
			// The budget is spent: the gang may not preempt this hour.
			RecentPreemptions: []PreemptionRecord{{At: now.Add(-time.Minute), JobID: "x", GPUs: 64}},
		}
	}
	alerted := func(d Decision) string {
		for _, a := range d.Alerts {
			if a.Kind == "starvation" {
				return a.Message
			}
		}
		return ""
	}
	d := Plan(state(true), now)
	if msg := alerted(d); msg != "" {
		t.Fatalf("a gang behind a preemptible job it outranks (the budget forbids it this hour) raised %q", msg)
	}
	if len(d.Preemptions) != 0 {
		t.Fatalf("the spent budget should have stopped the preemption: %+v", d.Preemptions)
	}
	d = Plan(state(false), now)
	if msg := alerted(d); !strings.Contains(msg, "cannot host job gang") || !strings.Contains(msg, "would not make room") {
		t.Fatalf("a gang 5h behind work it may never preempt: alert %q, want R2's cannot-host alert", msg)
	}
}
