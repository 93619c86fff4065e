package peer

import (
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sim"
)

// TestObserve: what polls turn into, without a live system.
func TestObserve(t *testing.T) {
	spec := &sim.JobSpec{ID: "j", Work: 10 * time.Minute, Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}}
	rec := &JobRecord{Spec: spec}
	r := &Run{}
	byID := map[string]*JobRecord{"j": rec}
	poll := func(at time.Duration, v JobView) {
		r.observe(Snapshot{Jobs: map[string]JobView{"j": v}}, byID, map[string]int{}, at, time.Minute)
	}
	run := JobView{State: Running, Nodes: []string{"n0"}, Placement: "n0:0-7"}
	poll(2*time.Minute, run)
	// Slurm bumps its restart count while the job still shows COMPLETING
	// (running), then shows it pending: one preemption, not two.
	run.Restarts = 1
	poll(4*time.Minute, JobView{State: Running, Restarts: 1, Nodes: run.Nodes, Placement: run.Placement})
	poll(5*time.Minute, JobView{State: Pending, Restarts: 1})
	if rec.Preemptions != 1 || len(rec.Runs) != 1 || rec.Runs[0].End != 5*time.Minute {
		t.Fatalf("after one requeue: %d preemptions, %d runs %+v", rec.Preemptions, len(rec.Runs), rec.Runs)
	}
	poll(6*time.Minute, run)
	// Requeued and restarted between two polls: only the count shows it.
	poll(8*time.Minute, JobView{State: Running, Restarts: 2, Nodes: []string{"n1"}, Placement: "n1:0-7"})
	if rec.Preemptions != 2 || len(rec.Runs) != 3 || rec.Runs[2].Placement != "n1:0-7" || rec.Runs[1].End != 8*time.Minute {
		t.Fatalf("after a restart between polls: %d preemptions, runs %+v", rec.Preemptions, rec.Runs)
	}
	poll(20*time.Minute, JobView{State: Done, Restarts: 2})
	if rec.State != Done || rec.Runs[2].End != 20*time.Minute {
		t.Fatalf("done: %+v", rec)
	}
	// Waited: 0-2m before the first run, 5-6m after the requeue.
	if rec.Waited != 3*time.Minute {
		t.Fatalf("waited %v, want 3m", rec.Waited)
	}
	// A system with no count of its own: transitions count.
	rec2 := &JobRecord{Spec: spec}
	byID = map[string]*JobRecord{"j": rec2}
	poll(1*time.Minute, JobView{State: Running})
	poll(2*time.Minute, JobView{State: Pending})
	poll(3*time.Minute, JobView{State: Running})
	if rec2.Preemptions != 1 || len(rec2.Runs) != 2 {
		t.Fatalf("without a system count: %d preemptions, %d runs", rec2.Preemptions, len(rec2.Runs))
	}
	s := Summarise(&Run{Jobs: []*JobRecord{rec}, GPUs: 8})
	// Held 2-5, 6-8, 8-20 = 17m for 10m of work, on 8 GPUs.
	if s.Preemptions != 2 || s.LostGPUHours < 0.93 || s.LostGPUHours > 0.94 {
		t.Fatalf("summary: %d preemptions, %.3f GPU-h lost", s.Preemptions, s.LostGPUHours)
	}
}

// TestShapeOf: both systems' shape from GPUs in use per node.
func TestShapeOf(t *testing.T) {
	w := full()
	l, free, alloc := shapeOf(w.Nodes, map[string]int{"n000": 8, "n001": 3}, map[string]bool{"n003": true})
	if free != 1 || alloc != 11 || l.Node != 8 || l.Pod != 8 {
		// n002 is the only whole node; n003 is closed; pod-a has 5 free on n001.
		t.Fatalf("largest %+v, free nodes %d, allocated %d", l, free, alloc)
	}
}
