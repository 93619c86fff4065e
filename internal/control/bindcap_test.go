package control

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// deferCount is an Observer that adds up BindsDeferred.
type deferCount struct {
	mu       sync.Mutex
	deferred int
}

func (o *deferCount) PlanDone(time.Duration)         {}
func (o *deferCount) PassDone(time.Duration)         {}
func (o *deferCount) ApplyDone(time.Duration, error) {}
func (o *deferCount) HeartbeatLag(time.Duration)     {}
func (o *deferCount) BindsDeferred(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deferred += n
}

func (o *deferCount) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deferred
}

// Five jobs wait for a node; when it comes, a pass may write only two of
// them (max_binds_per_pass 2): the five start over three passes. The
// core stops placing at the cap (sched.Config.MaxBinds), so the loop
// defers nothing it placed; a gang larger than the cap is still written,
// whole, in one pass.
func TestBindsPastTheCapWaitForTheNextPass(t *testing.T) {
	obs := &deferCount{}
	h := newHarness(t, Config{MaxBindsPerPass: 2, Metrics: obs})
	for i := range 5 {
		h.submit(trainingJob(fmt.Sprintf("j%d", i), 1))
	}
	h.settle()
	h.beat(report("n1", 1, 8))
	for i := range 5 {
		h.waitRunning(fmt.Sprintf("j%d", i), 1)
	}
	if got := obs.total(); got != 0 {
		t.Errorf("binds deferred: %d, want 0 (the pass places no more than it may write)", got)
	}

	for _, n := range []string{"n2", "n3", "n4"} {
		h.beat(report(n, 1, 8))
	}
	g := trainingJob("gang", 24)
	g.Shape.Topology = model.TopologyAny
	h.submit(g)
	h.waitFor("the 24-GPU gang to run whole", func() error {
		if j := h.job("gang"); j.State != model.JobRunning {
			return fmt.Errorf("gang is %s; pending reason %s", j.State, h.pendingReason("gang"))
		}
		gpus := 0
		for _, a := range h.allocsOf("gang") {
			gpus += a.GPUs.Count()
		}
		if gpus != 24 {
			return fmt.Errorf("gang runs on %d GPUs, want 24", gpus)
		}
		return nil
	})
	if got := obs.total(); got != 0 {
		t.Errorf("binds deferred: %d, want 0 (a gang is written whole)", got)
	}
}

// A deferred bind becomes a pending entry with a reason that names the
// cap: training ahead of the queue, a replica after it; a running job's
// growth is not a wait.
func TestDeferredBindsSayWhy(t *testing.T) {
	c := New(nil, Config{MaxBindsPerPass: 2})
	part := sched.Part{Node: "n1", GPUs: model.FullMask(1)}
	d := sched.Decision{
		Binds: []sched.Bind{
			{Kind: model.OwnerInference, OwnerID: "chat", Replica: 0, Placement: sched.Placement{Parts: []sched.Part{part}}},
			{Kind: model.OwnerTraining, OwnerID: "a", Placement: sched.Placement{Parts: []sched.Part{part, part}}},
			{Kind: model.OwnerBackfill, OwnerID: "b", Reservation: "big", Placement: sched.Placement{Parts: []sched.Part{part}}},
			{Kind: model.OwnerInference, OwnerID: "chat", Replica: 1, Placement: sched.Placement{Parts: []sched.Part{part}}},
			{Kind: model.OwnerTraining, OwnerID: "grow", Grow: true, Placement: sched.Placement{Parts: []sched.Part{part}}},
		},
		Pending: []sched.Pending{{Kind: model.OwnerTraining, OwnerID: "queued"}},
	}
	c.deferBinds(&d, 1)
	if len(d.Binds) != 1 || d.Binds[0].OwnerID != "chat" {
		t.Fatalf("binds kept: %+v, want chat's replica 0 only", d.Binds)
	}
	var got []string
	for _, p := range d.Pending {
		got = append(got, fmt.Sprintf("%s/%s/%d/%d", p.Kind, p.OwnerID, p.Replica, p.Missing))
		if p.OwnerID != "queued" && (p.Reason == nil || p.Reason.Constraint != "max_binds_per_pass") {
			t.Errorf("%s's reason: %+v, want one naming max_binds_per_pass", p.OwnerID, p.Reason)
		}
	}
	want := fmt.Sprint([]string{"training/a/0/0", "training/b/0/0", "training/queued/0/0", "inference/chat/1/1"})
	if fmt.Sprint(got) != want {
		t.Errorf("pending: %v, want %v", got, want)
	}
}
