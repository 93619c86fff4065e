package control

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
	"github.com/google/go-cmp/cmp"
)

func TestJobRunsToCompletion(t *testing.T) {
	h := newHarness(t, Config{})
	h.beat(report("n1", 1, 8))
	h.beat(report("n2", 1, 8))
	j := h.submit(trainingJob("train", 8))
	if j.State != model.JobPending {
		t.Fatalf("submitted job is %s, want pending", j.State)
	}
	a := h.waitRunning("train", 1)[0]
	if a.GPUs != model.FullMask(8) || a.OwnerKind != model.OwnerTraining || (a.NodeID != "n1" && a.NodeID != "n2") {
		t.Fatalf("allocation: %+v; want all 8 GPUs of one node", a)
	}
	other := map[string]string{"n1": "n2", "n2": "n1"}[a.NodeID]

	o := h.beat(report(a.NodeID, 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualStarting}))
	want := model.DesiredAlloc{ID: a.ID, OwnerKind: model.OwnerTraining, OwnerID: "train", GPUs: model.FullMask(8),
		Workload: j.Workload}
	if d := cmp.Diff([]model.DesiredAlloc{want}, o.Allocations); d != "" {
		t.Errorf("orders for %s (-want +got):\n%s", a.NodeID, d)
	}
	if o := h.beat(report(other, 1, 8)); len(o.Allocations) != 0 {
		t.Errorf("orders for the idle node %s: %+v", other, o.Allocations)
	}

	h.beat(report(a.NodeID, 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualRunning}))
	o = h.beat(report(a.NodeID, 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualExited, ExitCode: 0}))
	if len(o.Allocations) != 0 {
		t.Errorf("orders after the exit still name %+v", o.Allocations)
	}
	h.settle()
	got := h.job("train")
	if got.State != model.JobCompleted || got.FinishedAt.IsZero() || !hasEvent(got, "completed", "") {
		t.Errorf("job after exit 0: %s, finished %s, history %+v", got.State, got.FinishedAt, got.History)
	}
	if as := h.allocsOf("train"); len(as) != 0 {
		t.Errorf("allocations left after the exit: %+v", as)
	}
}

func TestNodeLostOnlyAfterGrace(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: time.Second, SuspectAfter: 3 * time.Second,
		LostAfter: 10 * time.Second, MassLossMin: 100})
	h.beat(report("small", 1, 4)) // keeps heartbeating; cannot host the job
	a := runOn(h, "big", map[string]int{"train": 8})["train"]

	// step moves the clock; "small" keeps reporting, "big" is silent.
	step := func(d time.Duration) {
		h.clk.Advance(d)
		h.beat(report("small", 1, 4))
	}
	step(2 * time.Second)
	h.settle()
	if n := h.node("big"); n.Health != model.HealthHealthy {
		t.Fatalf("big after 2 s of silence: %s, want healthy", n.Health)
	}
	step(2 * time.Second) // 4 s > SuspectAfter
	h.waitFor("big to be suspect", func() error {
		if n := h.node("big"); n.Health != model.HealthSuspect {
			return fmt.Errorf("big is %s", n.Health)
		}
		return nil
	})
	for range 3 {
		step(2 * time.Second) // up to 10 s: not yet past LostAfter
		h.settle()
		if n := h.node("big"); n.Health != model.HealthSuspect {
			t.Fatalf("big at %s of silence: %s, want suspect", h.clk.Now().Sub(t0), n.Health)
		}
		if _, ok := h.alloc(a.ID); !ok || h.job("train").State != model.JobRunning {
			t.Fatalf("work released within the grace, at %s of silence", h.clk.Now().Sub(t0))
		}
	}
	if n := h.node("small"); n.Health != model.HealthHealthy {
		t.Errorf("the reporting node is %s", n.Health)
	}

	step(time.Second) // 11 s > LostAfter
	h.waitFor("big to be lost", func() error {
		if n := h.node("big"); n.Health != model.HealthLost {
			return fmt.Errorf("big is %s", n.Health)
		}
		return nil
	})
	h.settle()
	if _, ok := h.alloc(a.ID); ok {
		t.Errorf("allocation %s on the lost node was not released", a.ID)
	}
	j := h.job("train")
	if j.State != model.JobPending || !hasEvent(j, "requeued", "node_lost") {
		t.Errorf("job after its node was lost: %s, history %+v; want pending, requeued for node_lost", j.State, j.History)
	}
	if n := h.node("small"); n.Health != model.HealthHealthy {
		t.Errorf("the reporting node is %s", n.Health)
	}
}

func TestMassUnreachabilityDeclaresNoneLost(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: time.Second, SuspectAfter: 3 * time.Second,
		LostAfter: 10 * time.Second, MassLossMin: 4})
	for _, n := range []string{"n2", "n3", "n4"} {
		h.beat(report(n, 1, 8))
	}
	a := runOn(h, "n1", map[string]int{"train": 8})["train"]
	// The job's node first, then the rest, whichever node holds it.
	nodes := []string{a.NodeID}
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if n != a.NodeID {
			nodes = append(nodes, n)
		}
	}

	h.clk.Advance(11 * time.Second) // every node silent past LostAfter
	h.waitFor("the mass-unreachable page", func() error {
		if rec, ok := h.ctl.Alert("mass-unreachable"); !ok || rec.ResolvedAt != nil {
			return fmt.Errorf("alerts: %+v", h.ctl.Alerts())
		}
		return nil
	})
	if !slices.ContainsFunc(h.ctl.Alerts(), func(r AlertRecord) bool { return r.ID == "mass-unreachable" }) {
		t.Errorf("Alerts() does not list mass-unreachable: %+v", h.ctl.Alerts())
	}
	h.settle()
	for _, id := range nodes {
		if n := h.node(id); n.Health != model.HealthSuspect {
			t.Errorf("node %s is %s during mass unreachability, want suspect", id, n.Health)
		}
	}
	if _, ok := h.alloc(a.ID); !ok {
		t.Errorf("allocation %s was released", a.ID)
	}
	if j := h.job("train"); j.State != model.JobRunning || hasEvent(j, "requeued", "") {
		t.Errorf("job was requeued: %s %+v", j.State, j.History)
	}

	// The fleet comes back, the job's node first: the page resolves.
	for _, id := range nodes {
		h.beat(report(id, 1, 8))
	}
	h.waitFor("the page to resolve", func() error {
		if rec, _ := h.ctl.Alert("mass-unreachable"); rec.ResolvedAt == nil {
			return errors.New("still open")
		}
		return nil
	})
	if _, ok := h.alloc(a.ID); !ok {
		t.Fatalf("allocation %s was released when its node came back", a.ID)
	}

	// One silent node of four is not a mass: it is lost after the grace.
	for range 6 {
		h.clk.Advance(2 * time.Second)
		for _, id := range nodes[1:] {
			h.beat(report(id, 1, 8))
		}
	}
	h.waitFor("the job's node to be lost", func() error {
		if n := h.node(a.NodeID); n.Health != model.HealthLost {
			return fmt.Errorf("%s is %s", a.NodeID, n.Health)
		}
		return nil
	})
	h.settle()
	if _, ok := h.alloc(a.ID); ok {
		t.Errorf("allocation %s on the lost node was not released", a.ID)
	}
	if rec, _ := h.ctl.Alert("mass-unreachable"); rec.ResolvedAt == nil {
		t.Errorf("one silent node of four raised the mass page again")
	}
}

// A node that was suspect and reports again is healthy: its heartbeat
// must not be judged by the silence it just ended.
func TestHeartbeatClearsSuspect(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: time.Second, SuspectAfter: 3 * time.Second,
		LostAfter: 10 * time.Second})
	h.beat(report("n1", 1, 8))
	for round := range 5 {
		h.clk.Advance(4 * time.Second)
		h.waitFor("n1 to be suspect", func() error {
			if n := h.node("n1"); n.Health != model.HealthSuspect {
				return fmt.Errorf("n1 is %s", n.Health)
			}
			return nil
		})
		h.beat(report("n1", 1, 8))
		h.settle()
		if n := h.node("n1"); n.Health != model.HealthHealthy {
			t.Fatalf("round %d: n1 is %s right after a heartbeat, want healthy", round, n.Health)
		}
	}
}

func TestStopDeadlineTurnsIntoKill(t *testing.T) {
	h := newHarness(t, Config{})
	a := runOn(h, "n1", map[string]int{"train": 8})["train"]
	w, err := h.ctl.Writer()
	if err != nil {
		t.Fatal(err)
	}
	a.Stopping, a.StopReason, a.StopDeadline = true, "preempted", h.clk.Now().Add(-time.Second)
	if _, err := w.Commit(h.ctx, w.Txn().Put(store.Allocations, a.ID, a)); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the kill", func() error {
		if got, ok := h.alloc(a.ID); !ok || !got.Killing {
			return fmt.Errorf("allocation %+v (present %v)", got, ok)
		}
		return nil
	})
	o := h.beat(report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualStopping}))
	if d, ok := desired(o, a.ID); !ok || !d.Stop || !d.Kill {
		t.Errorf("orders past the deadline: %+v (present %v); want stop and kill", d, ok)
	}

	// The GPUs stay taken until the agent confirms the exit.
	h.clk.Advance(time.Second)
	h.settle()
	if got, ok := h.alloc(a.ID); !ok || !got.Killing {
		t.Fatalf("killed allocation released before its exit was reported: %+v (present %v)", got, ok)
	}
	h.beat(report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualExited, ExitCode: 137, Killed: true}))
	if _, ok := h.alloc(a.ID); ok {
		t.Errorf("allocation %s still in the table after its exit", a.ID)
	}
	if j := h.job("train"); !hasEvent(j, "requeued", "preempted") || j.PreemptCount != 1 {
		t.Errorf("preempted job after the kill: preemptions %d, history %+v", j.PreemptCount, j.History)
	}
}

// TestIdleWaitPacesSlowPasses: with nothing changing, a loop whose pass is
// short passes every tick, and one whose pass is long spends at most a
// fifth of its time passing.
func TestIdleWaitPacesSlowPasses(t *testing.T) {
	for _, c := range []struct{ tick, pass, want time.Duration }{
		{time.Second, 100 * time.Millisecond, time.Second},
		{time.Second, 250 * time.Millisecond, time.Second},
		{time.Second, 1200 * time.Millisecond, 4800 * time.Millisecond},
		{50 * time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond},
	} {
		got := idleWait(c.tick, c.pass)
		if got != c.want {
			t.Errorf("idleWait(%v, %v) = %v, want %v", c.tick, c.pass, got, c.want)
		}
		if share := float64(c.pass) / float64(c.pass+got); share > 0.2 && c.pass > c.tick/4 {
			t.Errorf("a %v pass every %v is %.0f%% of a core", c.pass, got, 100*share)
		}
	}
}

// TestReplicaOfDeletedDeploymentStops: a replica whose deployment is gone
// (what a delete racing a bind left: the delete's view lacked the replica
// the pass had just bound) is stopped by the next pass, not left holding
// its node's GPUs.
func TestReplicaOfDeletedDeploymentStops(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: time.Second})
	h.beat(report("n1", 1, 8))
	w, err := h.ctl.Writer()
	if err != nil {
		t.Fatal(err)
	}
	orphan := model.Allocation{ID: "a-orphan", NodeID: "n1", GPUs: model.GPUMask(0xff), OwnerKind: model.OwnerInference,
		OwnerID: "gone", CreatedAt: h.clk.Now()}
	if _, err := w.Commit(h.ctx, w.Txn().Put(store.Allocations, orphan.ID, orphan)); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the orphaned replica stopping", func() error {
		a, ok := store.Get[model.Allocation](h.st.Cache(), store.Allocations, orphan.ID)
		if !ok || !a.Stopping || a.StopReason != "deleted" {
			return fmt.Errorf("allocation %+v (present %v)", a, ok)
		}
		return nil
	})
}
