package kube

import (
	"context"
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
	start := func(id string) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan struct{})
		el := Election{Identity: id, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second,
			RetryPeriod: 100 * time.Millisecond, Interval: 100 * time.Millisecond,
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
	stopA()
	<-doneA
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
