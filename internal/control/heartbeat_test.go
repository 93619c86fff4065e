package control

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
	"github.com/google/go-cmp/cmp"
)

func TestHeartbeatFirstContactCreatesNode(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: 2 * time.Second})
	// The agent still runs something from before: on first contact the
	// table assumes nothing runs there, so its orders name nothing.
	o := h.beat(report("n1", 7, 8, model.ActualAlloc{ID: "a-from-before", State: model.ActualRunning}))

	want := model.NodeOrders{NodeID: "n1", BootEpoch: 7, Fence: h.l.Fence(), HeartbeatInterval: 2 * time.Second,
		Allocations: []model.DesiredAlloc{}}
	if d := cmp.Diff(want, o); d != "" {
		t.Errorf("orders (-want +got):\n%s", d)
	}
	wantNode := model.Node{ID: "n1", Pod: "pod-a", Model: "H100", GPUs: 8, CPUMilli: 128000, MemoryMiB: 1 << 20,
		Health: model.HealthHealthy, BootEpoch: 7}
	if d := cmp.Diff(wantNode, h.node("n1")); d != "" {
		t.Errorf("node (-want +got):\n%s", d)
	}

	// The same report again changes nothing, so it writes nothing.
	modRev := func() int64 {
		var rev int64
		h.st.Cache().Read(func(v store.View) {
			e, _ := v.Get(store.Nodes, "n1")
			rev = e.ModRev
		})
		return rev
	}
	before := modRev()
	o = h.beat(report("n1", 7, 8))
	if o.Fence != h.l.Fence() {
		t.Errorf("second orders carry fence %d, want %d", o.Fence, h.l.Fence())
	}
	if after := modRev(); after != before {
		t.Errorf("an unchanged report rewrote the node (mod revision %d → %d)", before, after)
	}
}

func TestBootEpochChangeInvalidatesAllocations(t *testing.T) {
	h := newHarness(t, Config{})
	h.beat(report("n1", 1, 8))
	h.submit(trainingJob("train", 8))
	old := h.waitRunning("train", 1)[0]
	// Draining keeps the requeued job from being placed straight back, so
	// the requeue itself can be observed.
	if _, err := h.ctl.SetNode(h.ctx, "n1", Drain); err != nil {
		t.Fatal(err)
	}
	// The machine rebooted; its agent does not know better than to claim
	// the old allocation still runs.
	o := h.beat(report("n1", 2, 8, model.ActualAlloc{ID: old.ID, State: model.ActualRunning}))

	if len(o.Allocations) != 0 || o.BootEpoch != 2 {
		t.Errorf("orders after the new epoch: epoch %d, %+v; want epoch 2 and nothing to run", o.BootEpoch, o.Allocations)
	}
	if n := h.node("n1"); n.BootEpoch != 2 || n.Health != model.HealthHealthy || !n.Draining {
		t.Errorf("node after the new epoch: %+v", n)
	}
	if _, ok := h.alloc(old.ID); ok {
		t.Errorf("allocation %s of the old epoch is still in the table", old.ID)
	}
	h.settle()
	j := h.job("train")
	if j.State != model.JobPending || !hasEvent(j, "requeued", "node_rebooted") || !j.StartedAt.IsZero() {
		t.Errorf("job after its node restarted: state %s, started %s, history %+v", j.State, j.StartedAt, j.History)
	}
	if as := h.allocsOf("train"); len(as) != 0 {
		t.Errorf("requeued job was placed on a draining node: %+v", as)
	}
}

// runOn heartbeats one 8-GPU node and runs jobs of the given sizes there.
func runOn(h *harness, node string, jobs map[string]int) map[string]model.Allocation {
	h.t.Helper()
	h.beat(report(node, 1, 8))
	for id, gpus := range jobs {
		h.submit(trainingJob(id, gpus))
	}
	out := map[string]model.Allocation{}
	for id := range jobs {
		out[id] = h.waitRunning(id, 1)[0]
	}
	return out
}

func TestFaultNodeClass(t *testing.T) {
	h := newHarness(t, Config{})
	a := runOn(h, "n1", map[string]int{"train": 8})["train"]
	rep := report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualRunning})
	rep.Faults = []model.GPUFault{{GPU: 3, XID: 79, Kind: "xid", Message: "GPU has fallen off the bus"}}
	o := h.beat(rep)

	if n := h.node("n1"); !n.Quarantined {
		t.Errorf("XID 79 did not quarantine the node: %+v", n)
	}
	got, ok := h.alloc(a.ID)
	if !ok || !got.Stopping || got.StopReason != "gpu_fault" || got.StopDeadline.IsZero() {
		t.Errorf("allocation after XID 79: %+v (present %v); want stopping for gpu_fault", got, ok)
	}
	if d, _ := desired(o, a.ID); !d.Stop || d.Kill {
		t.Errorf("orders after XID 79: %+v; want stop without kill", d)
	}
	// The job moves: it is requeued when its process exits, and not
	// placed on the quarantined node again.
	h.beat(report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualExited, ExitCode: 143}))
	h.settle()
	if j := h.job("train"); j.State != model.JobPending || !hasEvent(j, "requeued", "gpu_fault") {
		t.Errorf("job after the fault: %s %+v", j.State, j.History)
	}
	if as := h.allocsOn("n1"); len(as) != 0 {
		t.Errorf("work placed on a quarantined node: %+v", as)
	}
}

func TestFaultGPUClass(t *testing.T) {
	h := newHarness(t, Config{})
	as := runOn(h, "n1", map[string]int{"left": 4, "right": 4})
	var hit, spared model.Allocation
	for _, a := range as {
		if a.GPUs.Has(2) {
			hit = a
		} else {
			spared = a
		}
	}
	if hit.ID == "" || spared.ID == "" {
		t.Fatalf("want one allocation on GPU 2 and one off it: %+v", as)
	}
	rep := report("n1", 1, 8)
	rep.Faults = []model.GPUFault{{GPU: 2, XID: 48, Kind: "xid", Message: "double bit ECC error"}}
	h.beat(rep)

	n := h.node("n1")
	if n.Quarantined || n.QuarantinedGPUs != model.MaskOf(2) {
		t.Errorf("after XID 48 on GPU 2: quarantined %v, GPUs %s; want GPU 2 alone", n.Quarantined, n.QuarantinedGPUs)
	}
	if a, _ := h.alloc(hit.ID); !a.Stopping || a.StopReason != "gpu_fault" {
		t.Errorf("allocation on GPU 2: %+v; want stopping for gpu_fault", a)
	}
	if a, _ := h.alloc(spared.ID); a.Stopping {
		t.Errorf("allocation off GPU 2 was stopped: %+v", a)
	}
}

func TestFaultApplicationClass(t *testing.T) {
	h := newHarness(t, Config{})
	a := runOn(h, "n1", map[string]int{"train": 8})["train"]
	rep := report("n1", 1, 8)
	rep.Faults = []model.GPUFault{{GPU: 0, XID: 13, Kind: "xid", Message: "graphics engine exception"}}
	h.beat(rep)

	if n := h.node("n1"); n.Quarantined || n.QuarantinedGPUs != 0 {
		t.Errorf("XID 13 quarantined hardware: %+v", n)
	}
	if got, _ := h.alloc(a.ID); got.Stopping {
		t.Errorf("XID 13 stopped the allocation: %+v", got)
	}
	if j := h.job("train"); !hasEvent(j, "gpu_error", "XID 13") || j.State != model.JobRunning {
		t.Errorf("job after XID 13: %s, history %+v; want running with a gpu_error event", j.State, j.History)
	}
}

// An application error or an unknown XID that the agent could not pin to
// a GPU is still not the hardware's fault: model.FaultApp quarantines nothing,
// model.FaultUnknown is recorded and otherwise ignored.
func TestFaultWithoutGPUQuarantinesOnlyHardwareClasses(t *testing.T) {
	h := newHarness(t, Config{})
	a := runOn(h, "n1", map[string]int{"train": 8})["train"]
	for _, f := range []model.GPUFault{{GPU: -1, XID: 13, Kind: "xid"}, {GPU: -1, XID: 999, Kind: "xid"}} {
		rep := report("n1", 1, 8)
		rep.Faults = []model.GPUFault{f}
		h.beat(rep)
		if n := h.node("n1"); n.Quarantined || n.QuarantinedGPUs != 0 {
			t.Errorf("XID %d (%s) on no particular GPU quarantined the node", f.XID, model.ClassifyFault(f))
		}
		if got, _ := h.alloc(a.ID); got.Stopping {
			t.Errorf("XID %d (%s) on no particular GPU stopped %s for %s", f.XID, model.ClassifyFault(f), got.ID, got.StopReason)
		}
	}
}

func TestClassify(t *testing.T) {
	type classCase struct {
		name  string
		fault model.GPUFault
		want  model.FaultClass
	}
	tests := []classCase{
		{"xid 79 off the bus", model.GPUFault{XID: 79, Kind: "xid"}, model.FaultNode},
		{"nvml failing", model.GPUFault{GPU: -1, Kind: "nvml"}, model.FaultNode},
		{"ecc", model.GPUFault{Kind: "ecc"}, model.FaultGPU},
		{"gpu lost", model.GPUFault{Kind: "lost"}, model.FaultGPU},
		{"unknown xid", model.GPUFault{XID: 999, Kind: "xid"}, model.FaultUnknown},
		{"no xid", model.GPUFault{Kind: "xid"}, model.FaultUnknown},
	}
	for _, x := range []int{46, 48, 62, 64, 95, 119, 120} {
		tests = append(tests, classCase{"xid " + strconv.Itoa(x), model.GPUFault{XID: x, Kind: "xid"}, model.FaultGPU})
	}
	for _, x := range []int{13, 31, 43, 45, 94} {
		tests = append(tests, classCase{"xid " + strconv.Itoa(x), model.GPUFault{XID: x, Kind: "xid"}, model.FaultApp})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, model.ClassifyFault(tc.fault)); d != "" {
				t.Errorf("model.ClassifyFault(%+v) (-want +got):\n%s", tc.fault, d)
			}
		})
	}
}

func TestStaleLeaderIsFenced(t *testing.T) {
	h := newHarness(t, Config{})
	old := h.l
	stale, err := h.ctl.Writer()
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Resign(h.ctx); err != nil {
		t.Fatal(err)
	}
	err, ok := h.run.wait(waitLimit)
	if !ok || !errors.Is(err, ErrLostLeadership) {
		t.Fatalf("Lead after resigning: returned %v, %v; want ErrLostLeadership", ok, err)
	}
	if _, err := h.ctl.Heartbeat(h.ctx, report("n1", 1, 8)); !errors.Is(err, ErrNotLeader) {
		t.Errorf("heartbeat while not leading: %v, want ErrNotLeader", err)
	}

	h.lead(h.campaign("leader-2"))
	if h.l.Fence() <= old.Fence() {
		t.Fatalf("fence did not increase: %d then %d", old.Fence(), h.l.Fence())
	}
	_, err = stale.Commit(h.ctx, stale.Txn().Put(store.Nodes, "ghost", model.Node{ID: "ghost", GPUs: 8}))
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("write through the old writer: %v, want ErrFenced", err)
	}
	if _, ok := store.Get[model.Node](h.st.Cache(), store.Nodes, "ghost"); ok {
		t.Error("the fenced write applied")
	}

	// An agent that has heard from a newer leader than this one refuses it.
	rep := report("n1", 1, 8)
	rep.Fence = h.l.Fence() + 1
	if _, err := h.ctl.Heartbeat(h.ctx, rep); !errors.Is(err, store.ErrFenced) {
		t.Errorf("heartbeat carrying a newer fence: %v, want ErrFenced", err)
	}
	if _, ok := store.Get[model.Node](h.st.Cache(), store.Nodes, "n1"); ok {
		t.Error("a heartbeat refused for its fence was applied")
	}
	// One that last heard the old leader is answered under the new fence.
	rep.Fence = old.Fence()
	if o := h.beat(rep); o.Fence != h.l.Fence() {
		t.Errorf("orders carry fence %d, want the new leader's %d", o.Fence, h.l.Fence())
	}
}

// A heartbeat that reports work still running writes nothing: not the
// node, not its allocations, not their jobs. One that names a checkpoint
// the job has not recorded records it as the job's restore point, once.
func TestSteadyHeartbeatWritesNothingAndCheckpointsOnce(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: 2 * time.Second})
	h.beat(report("n1", 1, 8))
	j := trainingJob("ckpt", 4)
	j.Preemptible = true
	j.Checkpoint = &model.Checkpoint{Path: "/ckpt", SizeBytes: 1 << 30}
	h.submit(j)
	a := h.waitRunning("ckpt", 1)[0]
	rev := func(k store.Kind, id string) int64 {
		var r int64
		h.st.Cache().Read(func(v store.View) {
			e, _ := v.Get(k, id)
			r = e.ModRev
		})
		return r
	}
	running := model.ActualAlloc{ID: a.ID, State: model.ActualRunning}
	h.beat(report("n1", 1, 8, running))
	node, alloc, job := rev(store.Nodes, "n1"), rev(store.Allocations, a.ID), rev(store.Jobs, "ckpt")
	for i := 0; i < 3; i++ {
		h.beat(report("n1", 1, 8, running))
	}
	if n, al, jb := rev(store.Nodes, "n1"), rev(store.Allocations, a.ID), rev(store.Jobs, "ckpt"); n != node || al != alloc || jb != job {
		t.Fatalf("steady heartbeats rewrote: node %d→%d, allocation %d→%d, job %d→%d", node, n, alloc, al, job, jb)
	}

	// Nor does it load anything for change: no copy of the allocation or
	// the job, and no precondition on them.
	w, err := h.ctl.Writer()
	if err != nil {
		t.Fatal(err)
	}
	ch := h.ctl.newChange(w, h.clk.Now())
	steady := report("n1", 1, 8, running)
	h.ctl.report(ch, &steady)
	if len(ch.allocs) != 0 || len(ch.jobs) != 0 {
		t.Errorf("a steady report loaded %d allocations and %d jobs for change", len(ch.allocs), len(ch.jobs))
	}

	running.Checkpoint = "/ckpt/step-100"
	h.beat(report("n1", 1, 8, running))
	if got := h.job("ckpt").Run().Restore; got != "/ckpt/step-100" {
		t.Fatalf("restore point %q after the agent reported /ckpt/step-100", got)
	}
	job = rev(store.Jobs, "ckpt")
	h.beat(report("n1", 1, 8, running))
	if jb := rev(store.Jobs, "ckpt"); jb != job {
		t.Errorf("the same checkpoint reported again rewrote the job (%d→%d)", job, jb)
	}
	running.Checkpoint = "/ckpt/step-200"
	h.beat(report("n1", 1, 8, running))
	if got := h.job("ckpt").Run().Restore; got != "/ckpt/step-200" {
		t.Errorf("restore point %q after the agent reported /ckpt/step-200", got)
	}
}

// TestHeartbeatNodeWritesOnlyWhatChanged: a heartbeat writes its node
// when any field of it changes, never when none does (an empty list sent
// where the table has none included), and never changes the cached node
// it read.
func TestHeartbeatNodeWritesOnlyWhatChanged(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: 2 * time.Second})
	mig := func() [][]int { return [][]int{{1, 1, 1, 1, 1, 1, 1}, nil} }
	links := func() *model.LinkMatrix { return &model.LinkMatrix{Links: [][]int{{0, 18}, {18, 0}}} }
	rep := report("n1", 1, 2)
	rep.MIG, rep.Links = mig(), links()
	h.beat(rep)
	cached := func() (model.Node, int64) {
		var n model.Node
		var r int64
		h.st.Cache().Read(func(v store.View) {
			e, _ := v.Get(store.Nodes, "n1")
			n, r = e.Obj.(model.Node), e.ModRev
		})
		return n, r
	}
	before, rev := cached()

	same := report("n1", 1, 2)
	same.MIG, same.Links = mig(), links() // equal, not the same memory
	h.beat(same)
	if _, r := cached(); r != rev {
		t.Fatalf("a heartbeat that changes nothing rewrote the node (%d→%d)", rev, r)
	}

	base := func() model.NodeReport {
		r := report("n1", 1, 2)
		r.MIG, r.Links = mig(), links()
		return r
	}
	for _, c := range []struct {
		name string
		edit func(*model.NodeReport)
		want func(model.Node) bool
	}{
		{"mig layout", func(r *model.NodeReport) { r.MIG[1] = []int{3, 4} },
			func(n model.Node) bool { return len(n.MIG) == 2 && len(n.MIG[1]) == 2 }},
		{"links", func(r *model.NodeReport) { r.Links.Links[0][1], r.Links.Links[1][0] = 12, 12 },
			func(n model.Node) bool { return n.Links != nil && n.Links.Links[0][1] == 12 }},
		{"memory", func(r *model.NodeReport) { r.MemoryMiB = 1 << 19 }, func(n model.Node) bool { return n.MemoryMiB == 1<<19 }},
		{"no mig", func(r *model.NodeReport) { r.MIG = nil }, func(n model.Node) bool { return len(n.MIG) == 0 }},
	} {
		// From the first report each time: each case changes one field.
		h.beat(base())
		_, rev = cached()
		r := base()
		c.edit(&r)
		h.beat(r)
		n, r2 := cached()
		if r2 == rev || !c.want(n) {
			t.Errorf("%s: changed in the report, but the node reads %+v (revision %d→%d)", c.name, n, rev, r2)
		}
		rev = r2
	}
	if before.MIG[1] != nil || before.Links.Links[0][1] != 18 || before.MemoryMiB != 1<<20 {
		t.Errorf("the node first cached was changed in place: %+v", before)
	}

	h.beat(base())
	h.beat(report("n1", 1, 2)) // no MIG, no links
	_, rev = cached()
	empty := report("n1", 1, 2)
	empty.MIG = [][]int{} // as the last report, MIG sent empty
	h.beat(empty)
	if _, r := cached(); r != rev {
		t.Errorf("an empty MIG list where the table has none rewrote the node (%d→%d)", rev, r)
	}
}

// equalValues settles a change's unchanged objects before any JSON: a
// loaded copy against the cache's value (a node) or pointer (a job), and
// never true for nil, so that an absent base is written.
func TestEqualValues(t *testing.T) {
	var nilNode *model.Node
	for _, tc := range []struct {
		a, b any
		want bool
	}{
		{&model.Node{ID: "n1", GPUs: 8}, model.Node{ID: "n1", GPUs: 8}, true},
		{&model.Node{ID: "n1", GPUs: 8}, model.Node{ID: "n1", GPUs: 4}, false},
		{&model.Job{ID: "j", History: []model.Event{{Event: "bound"}}}, &model.Job{ID: "j", History: []model.Event{{Event: "bound"}}}, true},
		{&model.Job{ID: "j"}, &model.Job{ID: "j", History: []model.Event{}}, false}, // left to the JSON compare
		{&model.Node{ID: "n1"}, nil, false},
		{nilNode, model.Node{}, false},
		{&model.Node{}, []byte("{}"), false},
	} {
		if got := equalValues(tc.a, tc.b); got != tc.want {
			t.Errorf("equalValues(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
