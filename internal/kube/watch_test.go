package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// frozen is a cache that stopped at one moment: what an informer shows in
// the moment between berth's write and its watch event.
type frozen struct {
	nodes []*corev1.Node
	pods  []*corev1.Pod
}

func (f *frozen) list(context.Context) ([]*corev1.Node, []*corev1.Pod, error) {
	// The lister hands out a new slice each time, sharing the objects.
	return append([]*corev1.Node(nil), f.nodes...), append([]*corev1.Pod(nil), f.pods...), nil
}

func (f *frozen) orgs(context.Context) (map[string]string, error) { return nil, nil }

func freeze(t *testing.T, e *env) *frozen {
	t.Helper()
	n, p, err := listSource{kc.cs}.list(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &frozen{n, p}
}

// A pass that reads a cache which has not yet seen the pass before it
// still counts that pass's binds and evictions: it binds nothing twice,
// hands out no GPU twice, and does not preempt (or charge the budget
// for) the same pod again.
func TestStaleCacheKeepsItsOwnWrites(t *testing.T) {
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	e.pod("j1", 4)
	s := e.scheduler(1)
	s.src = freeze(t, e)
	d := e.pass(s)
	if len(d.Binds) != 1 {
		t.Fatalf("first pass binds %+v, want j1", d.Binds)
	}
	d = e.pass(s) // the cache still shows j1 unbound
	if len(d.Binds) != 0 {
		t.Fatalf("a stale read bound again: %+v", d.Binds)
	}
	if got := d.Topology.LargestPlaceable.Node; got != 4 {
		t.Fatalf("largest_placeable.node on the stale read = %d, want 4 (j1's GPUs are taken)", got)
	}

	e.pod("low", 4, ann(AnnPreemptible, "true", AnnCheckpoint, "s3://ckpt/low", AnnPriority, "1"))
	s.src = listSource{kc.cs}
	e.pass(s)
	if node, _ := e.boundTo("low"); node == "" {
		t.Fatal("low not bound beside j1")
	}
	rs := e.replicaSet("web")
	e.pod("web-1", 4, ownedBy(rs), ann(AnnMinReplicas, "1"))
	s.src = freeze(t, e)
	if d := e.pass(s); len(d.Preemptions) != 1 {
		t.Fatalf("preemptions %+v, want low's", d.Preemptions)
	}
	if d := e.pass(s); len(d.Preemptions) != 0 { // the cache still shows low running
		t.Fatalf("a stale read preempted again: %+v", d.Preemptions)
	}
	kept, err := s.store.load(e.ctx)
	if err != nil || len(kept.Preemptions) != 1 {
		t.Fatalf("the budget holds %+v (%v), want one preemption", kept.Preemptions, err)
	}
}

// Watching: the scheduler reads informers, and a pod created while it
// leads is bound by a pass its creation triggered, well before the
// interval's tick.
func TestWatchingSchedulerBindsOnChange(t *testing.T) {
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan struct{})
	passes := make(chan error, 100)
	go func() {
		defer close(done)
		Run(ctx, kc.cs, Config{Namespace: e.ns}, Election{Identity: "w", LeaseDuration: 2 * time.Second, RenewDeadline: time.Second,
			RetryPeriod: 100 * time.Millisecond, Interval: time.Hour, OnPass: func(_ int64, err error) {
				select {
				case passes <- err:
				default:
				}
			}})
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-passes: // leading, caches synced, first pass done
	case <-time.After(30 * time.Second):
		t.Fatal("no pass within 30 s")
	}
	for i := range 3 {
		name := fmt.Sprintf("j%d", i)
		e.pod(name, 2)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if node, _ := e.boundTo(name); node != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not bound 10 s after it was created, with passes an hour apart unless something changes", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	used := map[string]bool{}
	for i := range 3 {
		_, gpus := e.boundTo(fmt.Sprintf("j%d", i))
		m, err := parseGPUs(gpus, 8)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range m.Indices() {
			if used[fmt.Sprint(g)] {
				t.Fatalf("GPU %d given to two pods", g)
			}
			used[fmt.Sprint(g)] = true
		}
	}
}
