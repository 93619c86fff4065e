package kube

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two replicas elect a leader through a real Lease; the leader binds
// under fence 1; when it steps down the other takes over under fence 2
// and binds what comes next.
func TestTwoReplicasHandOver(t *testing.T) {
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	e.pod("j1", 4)
	var mu sync.Mutex
	fences := map[string]int64{}
	status := map[string]*Status{"a": NewStatus(), "b": NewStatus()}
	start := func(id string) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan struct{})
		el := Election{Identity: id, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second,
			RetryPeriod: 100 * time.Millisecond, Interval: 100 * time.Millisecond, Status: status[id],
			OnPass: func(f int64, err error) {
				mu.Lock()
				fences[id] = f
				mu.Unlock()
			}}
		go func() {
			defer close(done)
			Run(ctx, kc.cs, Config{Namespace: e.ns}, el)
		}()
		return cancel, done
	}
	waitBound := func(name string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if node, _ := e.boundTo(name); node != "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not bound after 30 s", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	stopA, doneA := start("a")
	waitBound("j1")
	stopB, doneB := start("b")
	defer func() { stopB(); <-doneB }()
	if f := e.get("j1").Annotations[AnnFence]; f != "1" {
		t.Fatalf("j1 bound under fence %q, want 1", f)
	}
	// The leader shows its last pass: leading, its fence, the free sets.
	srv := httptest.NewServer(status["a"].Handler())
	defer srv.Close()
	var body statusBody
	// The bind is seen before the pass that made it is recorded.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if getJSON(t, srv.URL+"/v1/kube/status", &body); body.Topology != nil {
			break
		}
	}
	if !body.Leading || body.Fence != 1 || body.Topology == nil || body.Topology.LargestPlaceable.Node != 4 {
		t.Fatalf("leader's status = %+v, want leading under fence 1 with 4 GPUs placeable in one node", body)
	}
	if m := get(t, srv.URL+"/metrics"); !strings.Contains(m, `berth_kube_largest_placeable_gpus{topology="node"} 4`) || !strings.Contains(m, "berth_kube_leader 1") {
		t.Fatalf("leader's metrics lack largest_placeable or leader:\n%s", m)
	}
	stopA()
	<-doneA
	getJSON(t, srv.URL+"/v1/kube/status", &body)
	if body.Leading {
		t.Fatal("a stepped down but its status says it leads")
	}
	e.pod("j2", 4)
	waitBound("j2")
	if f := e.get("j2").Annotations[AnnFence]; f != "2" {
		t.Fatalf("j2 bound under fence %q, want 2 (the new leader's)", f)
	}
	mu.Lock()
	defer mu.Unlock()
	if fences["b"] != 2 {
		t.Fatalf("replica b led under fence %d, want 2", fences["b"])
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(get(t, url)), out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
