package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// tamper is a reverse proxy in front of the real server that can rewrite
// its answers to heartbeats: a stale leader, a broken middlebox, a bug.
type tamper struct {
	srv     *httptest.Server
	rewrite atomic.Pointer[func(status *int, body []byte) []byte]
}

func newTamper(t *testing.T, backend string) *tamper {
	u, _ := url.Parse("http://" + backend)
	tp := &tamper{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.URL.Path != "/v1/agent/heartbeat" {
			return nil
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		r.Body.Close()
		// The proxy is the only way to the server: orders must not name
		// the server itself (which they do, so agents know every server).
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			delete(m, "servers")
			body, _ = json.Marshal(m)
		}
		status := r.StatusCode
		if fn := tp.rewrite.Load(); fn != nil {
			body = (*fn)(&status, body)
		}
		r.StatusCode = status
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	tp.srv = httptest.NewServer(rp)
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *tamper) set(fn func(status *int, body []byte) []byte) { tp.rewrite.Store(&fn) }
func (tp *tamper) pass()                                        { tp.rewrite.Store(nil) }

// orders rewrites the decoded orders.
func (tp *tamper) orders(edit func(o *model.NodeOrders)) {
	tp.set(func(_ *int, body []byte) []byte {
		var o model.NodeOrders
		if json.Unmarshal(body, &o) != nil {
			return body
		}
		edit(&o)
		b, _ := json.Marshal(o)
		return b
	})
}

func (tp *tamper) addr() string { return tp.srv.Listener.Addr().String() }

// holdsSteady waits several heartbeats of rejected answers and checks the
// work was not touched.
func holdsSteady(t *testing.T, what string, ra *runningAgent, pid int, alloc string) {
	t.Helper()
	acc, _ := ra.Counts()
	time.Sleep(4 * hbInterval)
	if now, _ := ra.Counts(); now != acc {
		t.Fatalf("%s: the agent acted on %d answers it should have refused", what, now-acc)
	}
	if !alive(pid) {
		t.Fatalf("%s: the workload died", what)
	}
	for _, a := range ra.Allocations() {
		if a.ID == alloc && a.State != model.ActualRunning {
			t.Fatalf("%s: %s is %s", what, alloc, a.State)
		}
	}
}

// TestFenceRegressionIgnored: orders under a lower fence than one already
// seen, saying nothing should run, stop nothing; orders under the current
// fence are acted on again afterwards.
func TestFenceRegressionIgnored(t *testing.T) {
	f := newFleet(t)
	tp := newTamper(t, f.listen)
	n1 := f.startAgent("n1", tp.addr())
	j := f.submit(api.JobRequest{Name: "fenced", GPUs: 8}, "train", "-steps", "100000", "-step-time", "50ms")
	alloc := f.running(n1, j)
	pid := n1.pid(t, alloc)
	fence := n1.Fence()
	if fence <= 0 {
		t.Fatalf("fence %d after accepted orders", fence)
	}
	tp.orders(func(o *model.NodeOrders) {
		o.Fence = fence - 1
		o.Allocations = []model.DesiredAlloc{}
	})
	_, rej := n1.Counts()
	holdsSteady(t, "stale fence", n1, pid, alloc)
	if _, now := n1.Counts(); now <= rej {
		t.Fatalf("no answer was refused")
	}
	if n1.Fence() != fence {
		t.Fatalf("fence moved to %d", n1.Fence())
	}
	// A higher fence with the same empty desired state is a new leader
	// whose table does not have the allocation: it is stopped.
	tp.orders(func(o *model.NodeOrders) {
		o.Fence = fence + 1
		o.Allocations = []model.DesiredAlloc{}
	})
	eventually(t, "unknown allocation stopped under a higher fence", func() error {
		if alive(pid) {
			return fmt.Errorf("pid %d alive", pid)
		}
		return nil
	})
	if n1.Fence() != fence+1 {
		t.Fatalf("fence %d, want %d", n1.Fence(), fence+1)
	}
}

// TestMalformedOrdersLeaveWorkAlone: every kind of broken answer (one
// that may not be this node's desired state at all) is refused whole and the running work is left exactly as it was.
func TestMalformedOrdersLeaveWorkAlone(t *testing.T) {
	f := newFleet(t)
	tp := newTamper(t, f.listen)
	n1 := f.startAgent("n1", tp.addr())
	j := f.submit(api.JobRequest{Name: "steady", GPUs: 4}, "train", "-steps", "100000", "-step-time", "50ms")
	alloc := f.running(n1, j)
	pid := n1.pid(t, alloc)
	raw := func(status int, body string) func(*int, []byte) []byte {
		return func(s *int, _ []byte) []byte { *s = status; return []byte(body) }
	}
	cases := map[string]func(*int, []byte) []byte{
		"garbage":          raw(200, "<html>proxy error</html>"),
		"truncated":        func(_ *int, b []byte) []byte { return b[:len(b)/2] },
		"empty":            raw(200, ""),
		"trailing garbage": func(_ *int, b []byte) []byte { return append(b, []byte("}{")...) },
		"wrong types":      raw(200, `{"node_id": 7, "fence": "x"}`),
		"server error":     raw(500, `{"error":{"code":"internal","message":"boom"}}`),
	}
	edits := map[string]func(*model.NodeOrders){
		"allocations null": func(o *model.NodeOrders) { o.Allocations = nil },
		"other node":       func(o *model.NodeOrders) { o.NodeID = "n2"; o.Allocations = []model.DesiredAlloc{} },
		"other epoch":      func(o *model.NodeOrders) { o.BootEpoch++; o.Allocations = []model.DesiredAlloc{} },
		"no fence":         func(o *model.NodeOrders) { o.Fence = 0; o.Allocations = []model.DesiredAlloc{} },
		"absurd interval":  func(o *model.NodeOrders) { o.HeartbeatInterval = 24 * time.Hour },
	}
	for name, fn := range cases {
		tp.set(fn)
		holdsSteady(t, name, n1, pid, alloc)
	}
	for name, edit := range edits {
		tp.orders(edit)
		holdsSteady(t, name, n1, pid, alloc)
	}
	tp.pass()
	acc, _ := n1.Counts()
	eventually(t, "acting on good orders again", func() error {
		if now, _ := n1.Counts(); now <= acc {
			return fmt.Errorf("none accepted")
		}
		return nil
	})
	if jj := f.job(j); jj.State != model.JobRunning || jj.Allocations[0].ID != alloc {
		t.Fatalf("job %s %v after the bad answers", jj.State, jj.Allocations)
	}
}

// TestOneBadAllocationIsRefusedAlone: an allocation no agent could run
// (GPUs off the node, an id that is a path, a duplicate, a NUL in its
// command) is refused alone and reported as exited with why; the rest of
// the orders are carried out: a cancelled job stops and a new one starts
// while the bad one is still in every answer. A running allocation whose
// order goes bad keeps running.
func TestOneBadAllocationIsRefusedAlone(t *testing.T) {
	f := newFleet(t)
	tp := newTamper(t, f.listen)
	n1 := f.startAgent("n1", tp.addr())
	j1 := f.submit(api.JobRequest{Name: "first", GPUs: 4}, "train", "-steps", "100000", "-step-time", "50ms")
	a1 := f.running(n1, j1)
	pid1 := n1.pid(t, a1)
	bad := []model.DesiredAlloc{
		{ID: "off-node", OwnerKind: model.OwnerTraining, OwnerID: "x", GPUs: 1 << 9},
		{ID: "../../etc", OwnerKind: model.OwnerTraining, OwnerID: "x", GPUs: 1},
		{ID: "nul-arg", OwnerKind: model.OwnerTraining, OwnerID: "x", GPUs: 1 << 7,
			Workload: &model.Workload{Command: []string{"/bin/echo", "a\x00b"}}},
	}
	tp.orders(func(o *model.NodeOrders) {
		for i := range o.Allocations {
			if o.Allocations[i].ID == a1 {
				o.Allocations = append(o.Allocations, o.Allocations[i]) // listed twice
			}
		}
		o.Allocations = append(o.Allocations, bad...)
	})
	eventually(t, "the bad allocations reported as refused", func() error {
		got := map[string]model.ActualAlloc{}
		for _, a := range n1.Allocations() {
			got[a.ID] = a
		}
		for _, b := range bad {
			a, ok := got[b.ID]
			if !ok || a.State != model.ActualExited || a.ExitCode != 126 || a.Error == "" {
				return fmt.Errorf("%s: %+v", b.ID, a)
			}
		}
		if a := got[a1]; a.State != model.ActualRunning {
			return fmt.Errorf("%s is %s", a1, a.State)
		}
		return nil
	})
	if !alive(pid1) {
		t.Fatalf("the running workload died")
	}
	// The node keeps converging: cancel the first job, start a second.
	if _, err := f.api.CancelJob(context.Background(), j1); err != nil {
		t.Fatal(err)
	}
	j2 := f.submit(api.JobRequest{Name: "second", GPUs: 2}, "train", "-steps", "100000", "-step-time", "50ms")
	a2 := f.running(n1, j2)
	eventually(t, "the cancelled job's workload stopped", func() error {
		if alive(pid1) {
			return fmt.Errorf("pid %d alive", pid1)
		}
		return nil
	})
	// A running allocation whose order goes bad is left running.
	pid2 := n1.pid(t, a2)
	tp.orders(func(o *model.NodeOrders) {
		for i := range o.Allocations {
			if o.Allocations[i].ID == a2 {
				o.Allocations[i].GPUs = 1 << 20
			}
		}
	})
	eventually(t, "the bad order for "+a2+" reported", func() error {
		n := 0
		for _, a := range n1.Allocations() {
			if a.ID == a2 && a.State == model.ActualRunning {
				n++
			}
		}
		acc, _ := n1.Counts()
		if n != 1 || acc == 0 {
			return fmt.Errorf("%s not running", a2)
		}
		return nil
	})
	time.Sleep(3 * hbInterval)
	if !alive(pid2) {
		t.Fatalf("the workload whose order went bad was stopped")
	}
	tp.pass()
}
