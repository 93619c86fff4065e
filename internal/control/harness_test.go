package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

// t0 is when every test's clock starts.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// waitLimit bounds every poll: generous, for a loaded two-core machine.
const waitLimit = 30 * time.Second

// fakeClock is the controller's clock; only the test moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// leadRun is one Lead call running in the background.
type leadRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// wait returns Lead's result once it has returned, or false after the limit.
func (r *leadRun) wait(limit time.Duration) (error, bool) {
	select {
	case <-r.done:
		return r.err, true
	case <-time.After(limit):
		return nil, false
	}
}

// harness is a controller leading over a real embedded etcd.
type harness struct {
	t   testing.TB
	ctx context.Context
	st  *store.Store
	clk *fakeClock
	ctl *Controller
	l   *store.Leadership
	run *leadRun
}

// newHarness opens a table in a temporary directory, wins the election and
// starts the loop. Zero Clock and Tick get a fake clock and a short tick.
func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	st, err := store.Open(ctx, store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	h := &harness{t: t, ctx: ctx, st: st, clk: &fakeClock{now: t0}}
	if cfg.Clock == nil {
		cfg.Clock = h.clk.Now
	}
	if cfg.Tick == 0 {
		cfg.Tick = 25 * time.Millisecond
	}
	h.ctl = New(st, cfg)
	l := h.campaign("leader-1")
	t.Cleanup(func() {
		if h.run != nil {
			h.run.cancel()
			if err, ok := h.run.wait(waitLimit); !ok {
				t.Errorf("Lead did not return after its context ended")
			} else if err != nil {
				t.Errorf("Lead: %v", err)
			}
		}
		h.l.Resign(context.Background())
	})
	h.lead(l)
	return h
}

func (h *harness) campaign(id string) *store.Leadership {
	h.t.Helper()
	l, err := h.st.Campaign(h.ctx, id, 5*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// lead starts the loop under l and waits until the controller leads.
func (h *harness) lead(l *store.Leadership) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &leadRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = h.ctl.Lead(ctx, l)
		close(r.done)
	}()
	h.l, h.run = l, r
	h.waitFor("the controller to lead", func() error {
		if w, err := h.ctl.Writer(); err != nil || w.Fence() != l.Fence() {
			return errors.New("not leading under the new fence yet")
		}
		return nil
	})
}

// waitFor polls cond, kicking the loop each time, until it returns nil.
func (h *harness) waitFor(what string, cond func() error) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("waiting for %s: %v", what, err)
		}
		h.ctl.Kick()
		time.Sleep(10 * time.Millisecond)
	}
}

// settle waits for a pass that read the clock as it is now and the table as
// it is now, and found no housekeeping to do: liveness and deadlines at
// this instant are in the table.
func (h *harness) settle() {
	h.t.Helper()
	now, rev := h.clk.Now(), h.st.Cache().Rev()
	h.waitFor("a quiet pass", func() error {
		s := h.ctl.Last()
		if s == nil || s.At.Before(now) || s.Rev < rev {
			return fmt.Errorf("last planning pass %+v; want one at %s, revision %d", s, now, rev)
		}
		return nil
	})
}

// report is a node's heartbeat: 8 GPUs unless changed by the caller.
func report(node string, epoch uint64, gpus int, allocs ...model.ActualAlloc) model.NodeReport {
	return model.NodeReport{NodeID: node, BootEpoch: epoch, Pod: "pod-a", Model: "H100", GPUs: gpus,
		CPUMilli: 128000, MemoryMiB: 1 << 20, Allocations: allocs}
}

func (h *harness) beat(rep model.NodeReport) model.NodeOrders {
	h.t.Helper()
	o, err := h.ctl.Heartbeat(h.ctx, rep)
	if err != nil {
		h.t.Fatalf("heartbeat of %s: %v", rep.NodeID, err)
	}
	return o
}

func trainingJob(id string, gpus int) model.Job {
	return model.Job{ID: id, Shape: model.Shape{GPUs: gpus, Topology: model.TopologyNode},
		Workload: &model.Workload{Command: []string{"python", "train.py", "--run", id}, Env: map[string]string{"RUN": id}}}
}

func (h *harness) submit(j model.Job) model.Job {
	h.t.Helper()
	out, created, err := h.ctl.SubmitJob(h.ctx, j, "alice", "")
	if err != nil || !created {
		h.t.Fatalf("submit %s: created %v, %v", j.ID, created, err)
	}
	return out
}

func (h *harness) job(id string) model.Job {
	h.t.Helper()
	j, ok := store.Get[model.Job](h.st.Cache(), store.Jobs, id)
	if !ok {
		h.t.Fatalf("job %s is not in the table", id)
	}
	return j
}

func (h *harness) node(id string) model.Node {
	h.t.Helper()
	n, ok := store.Get[model.Node](h.st.Cache(), store.Nodes, id)
	if !ok {
		h.t.Fatalf("node %s is not in the table", id)
	}
	return n
}

func (h *harness) alloc(id string) (model.Allocation, bool) {
	return store.Get[model.Allocation](h.st.Cache(), store.Allocations, id)
}

func (h *harness) allocsOf(owner string) []model.Allocation {
	var out []model.Allocation
	h.st.Cache().Read(func(v store.View) { out = v.AllocationsOf(owner) })
	return out
}

func (h *harness) allocsOn(node string) []model.Allocation {
	var out []model.Allocation
	h.st.Cache().Read(func(v store.View) { out = v.AllocationsOn(node) })
	return out
}

// waitRunning waits until a job runs with n allocations and returns them.
func (h *harness) waitRunning(id string, n int) []model.Allocation {
	h.t.Helper()
	var as []model.Allocation
	h.waitFor("job "+id+" to run", func() error {
		j, ok := store.Get[model.Job](h.st.Cache(), store.Jobs, id)
		as = h.allocsOf(id)
		if !ok || j.State != model.JobRunning || len(as) != n {
			return fmt.Errorf("job %s is %q with %d allocations; pending reason %s", id, j.State, len(as), h.pendingReason(id))
		}
		return nil
	})
	return as
}

func (h *harness) pendingReason(id string) string {
	if s := h.ctl.Last(); s != nil {
		if p := s.Pending(id); p != nil {
			return fmt.Sprintf("%+v", p.Reason)
		}
	}
	return "(none)"
}

// hasEvent reports whether the job's history holds event with detail
// containing sub.
func hasEvent(j model.Job, event, sub string) bool {
	for _, e := range j.History {
		if e.Event == event && strings.Contains(e.Detail, sub) {
			return true
		}
	}
	return false
}

func desired(o model.NodeOrders, id string) (model.DesiredAlloc, bool) {
	for _, d := range o.Allocations {
		if d.ID == id {
			return d, true
		}
	}
	return model.DesiredAlloc{}, false
}
