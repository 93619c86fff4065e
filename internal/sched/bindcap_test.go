package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched/schedtest"
)

// With MaxBinds, the pass walks the queue in rank order until it has
// placed that many allocations, and the rest wait with a reason that
// names the cap: not placed, not held for, not made room for. A gang
// that starts below the cap is placed whole though it crosses it, and
// nothing grows while the queue waits. Without the cap the same pass
// places every job that fits.
func TestMaxBindsEndsTheQueueWalk(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := State{Nodes: schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 8, GPUs: 8})}
	// An elastic job running at its minimum on node 7, which could grow
	// onto the free GPUs beside it.
	el := &model.Job{ID: "elastic", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Elastic: &model.Elastic{MinGPUs: 4, MaxGPUs: 8},
		Size: 4, State: model.JobRunning, SubmittedAt: now.Add(-3 * time.Hour), StartedAt: now.Add(-2 * time.Hour), ResizedAt: now.Add(-2 * time.Hour)}
	s.Jobs = append(s.Jobs, el)
	s.Allocations = append(s.Allocations, model.Allocation{ID: "a-elastic", NodeID: schedtest.NodeName(7), GPUs: model.FullMask(4),
		OwnerKind: model.OwnerTraining, OwnerID: "elastic", CreatedAt: now.Add(-2 * time.Hour)})
	// Highest priority first: three 1-GPU jobs, a 16-GPU gang (two
	// allocations), then ten 1-GPU jobs.
	add := func(id string, gpus, prio int, topo model.Topology) {
		s.Jobs = append(s.Jobs, &model.Job{ID: id, Shape: model.Shape{GPUs: gpus, Topology: topo}, Priority: prio,
			State: model.JobPending, SubmittedAt: now.Add(-time.Minute)})
	}
	for i := range 3 {
		add(fmt.Sprintf("first-%d", i), 1, 90, model.TopologyNode)
	}
	add("gang", 16, 80, model.TopologyAny)
	for i := range 10 {
		add(fmt.Sprintf("later-%02d", i), 1, 70, model.TopologyNode)
	}

	all := Plan(s, now)
	if len(all.Binds) < 14 {
		t.Fatalf("without a cap: %d binds, want all 14 queued jobs placed (and maybe growth): %+v", len(all.Binds), all.Binds)
	}

	s.Config.MaxBinds = 4
	d := Plan(s, now)
	var bound []string
	parts := 0
	for _, b := range d.Binds {
		bound = append(bound, b.OwnerID)
		parts += len(b.Parts)
		if b.Grow {
			t.Errorf("%s grew while the queue waited at the cap", b.OwnerID)
		}
	}
	if want := fmt.Sprint([]string{"first-0", "first-1", "first-2", "gang"}); fmt.Sprint(bound) != want {
		t.Fatalf("bound %v, want %v", bound, want)
	}
	if parts < 4 {
		t.Errorf("%d allocations placed, want the gang whole past the cap", parts)
	}
	if len(d.Pending) != 10 {
		t.Fatalf("pending %d, want the ten later jobs", len(d.Pending))
	}
	for i, p := range d.Pending {
		if p.OwnerID != fmt.Sprintf("later-%02d", i) {
			t.Errorf("pending[%d] is %s, want later-%02d (rank order)", i, p.OwnerID, i)
		}
		if p.Reason == nil || p.Reason.Constraint != "max_binds_per_pass" {
			t.Errorf("%s's reason %+v, want one naming max_binds_per_pass", p.OwnerID, p.Reason)
		}
		if p.Priority == nil || p.Priority.Base != 70 {
			t.Errorf("%s's priority %+v, want base 70", p.OwnerID, p.Priority)
		}
	}
	if len(d.Preemptions) != 0 || len(d.Reservations) != 0 {
		t.Errorf("preemptions %+v, reservations %+v: want none for jobs the pass did not reach", d.Preemptions, d.Reservations)
	}
}
