package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched/schedtest"
)

// The pass places every job of a shape with its shape's request, filled
// in with the job's own id and priority. Two gangs of one shape that each
// hold GPUs must hold them under their own names, with their own ranks,
// and the second must not fail because the first one's shape failed.
func TestJobsOfOneShapeKeepTheirOwnNames(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s := State{Nodes: schedtest.Fleet(schedtest.Spec{Pods: 2, NodesPerPod: 4, GPUs: 8})}
	s.Config.MaxHolds, s.Config.HoldMinGPUs = 2, 16
	// Each pod has one node busy with work that may not be preempted:
	// neither gang fits, and each holds the other three nodes of a pod.
	for i, n := range []string{schedtest.NodeName(0), schedtest.NodeName(4)} {
		id := fmt.Sprintf("busy-%d", i)
		s.Jobs = append(s.Jobs, &model.Job{ID: id, Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode},
			State: model.JobRunning, SubmittedAt: now.Add(-time.Hour), StartedAt: now.Add(-time.Hour)})
		s.Allocations = append(s.Allocations, model.Allocation{ID: "a-" + id, NodeID: n, GPUs: model.FullMask(8),
			OwnerKind: model.OwnerTraining, OwnerID: id, CreatedAt: now.Add(-time.Hour)})
	}
	gang := model.Shape{GPUs: 32, Topology: model.TopologyPod}
	for i, prio := range []int{50, 40} {
		s.Jobs = append(s.Jobs, &model.Job{ID: fmt.Sprintf("gang-%d", i), Shape: gang, Priority: prio,
			State: model.JobPending, SubmittedAt: now.Add(-time.Duration(10-i) * time.Minute)})
	}
	d := Plan(s, now)
	if len(d.Reservations) != 2 {
		t.Fatalf("reservations %+v; want one for each gang", d.Reservations)
	}
	owners := map[string]int{}
	for _, r := range d.Reservations {
		owners[r.Owner] = r.Rank
		if r.HeldGPUs() != 24 {
			t.Errorf("%s holds %d GPUs; want the 24 free in its pod", r.Owner, r.HeldGPUs())
		}
	}
	if owners["gang-0"] != 50 || owners["gang-1"] != 40 {
		t.Errorf("owners and ranks %v; want gang-0 at 50 and gang-1 at 40", owners)
	}
	if d.Reservations[0].At == d.Reservations[1].At {
		t.Errorf("both hold at %s", d.Reservations[0].At)
	}
	if len(d.Pending) != 2 || d.Pending[0].OwnerID != "gang-0" || d.Pending[1].OwnerID != "gang-1" {
		t.Fatalf("pending %+v; want gang-0 then gang-1", d.Pending)
	}
	for _, p := range d.Pending {
		if p.Priority.Base != map[string]int{"gang-0": 50, "gang-1": 40}[p.OwnerID] {
			t.Errorf("%s: priority %+v", p.OwnerID, *p.Priority)
		}
	}
}

// Model lists are part of a shape, and a name may hold any character: a
// list of one name with a bar in it is not the two names either side.
func TestShapeKeyKeepsModelListsApart(t *testing.T) {
	one := model.Request{Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode, Models: []string{"a|b"}}, Kind: model.OwnerTraining}
	two := one
	two.Models = []string{"a", "b"}
	if shapeKey(&one) == shapeKey(&two) {
		t.Fatalf("%q and %q share a shape key", one.Models, two.Models)
	}
	same := one
	same.Models = []string{"a|b"}
	if shapeKey(&one) != shapeKey(&same) {
		t.Fatal("equal model lists have different keys")
	}
	// One name is its own key: no name may pass for a list.
	for _, list := range [][]string{{"a", "b"}, {"b", "a"}, {"a", "a"}} {
		listed := one
		listed.Models = list
		named := one
		named.Models = []string{modelsKey(list)}
		if shapeKey(&listed) == shapeKey(&named) {
			t.Errorf("the list %q and the one name %q share a shape key", list, named.Models[0])
		}
	}
	var none, empty model.Request
	empty.Models = []string{""}
	if shapeKey(&none) == shapeKey(&empty) {
		t.Error("no model list and a list of one empty name share a shape key")
	}
}

// A second pass reuses the first pass's queue buffers: what it decides
// must not depend on what the last pass left in them.
func TestQueueBuffersCarryNothingOver(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	big := busyState(64, 2, 3000, false) // over the size the radix sort takes
	small := State{Nodes: schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 2, GPUs: 8})}
	small.Jobs = []*model.Job{{ID: "only", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, State: model.JobPending, SubmittedAt: now}}
	want := Plan(small, now)
	first := Plan(big, now) // the pool may be empty: fresh buffers
	got := Plan(small, now)
	if len(got.Binds) != 1 || got.Binds[0].OwnerID != "only" || len(got.Pending) != 0 || len(want.Binds) != 1 {
		t.Fatalf("after a large pass: binds %+v, pending %+v; before it binds %+v", got.Binds, got.Pending, want.Binds)
	}
	if len(first.Pending) < 2000 {
		t.Fatalf("%d pending: the state no longer makes a queue the radix sort takes", len(first.Pending))
	}
	for i := 0; i < 3; i++ {
		again := Plan(big, now)
		if len(again.Pending) != len(first.Pending) || len(again.Binds) != len(first.Binds) {
			t.Fatalf("pass %d: %d pending and %d binds; the first pass %d and %d", i, len(again.Pending), len(again.Binds), len(first.Pending), len(first.Binds))
		}
		for k := range first.Pending {
			a, b := first.Pending[k], again.Pending[k]
			if a.OwnerID != b.OwnerID || *a.Priority != *b.Priority || a.Reason.Message != b.Reason.Message {
				t.Fatalf("pass %d, pending %d: %+v, the first pass %+v", i, k, b, a)
			}
		}
	}
}

// The request the pass hands on for a job (here to defragmentation, which
// takes the blocked ones) is its own: its id and priority, not those of
// the first job of its shape.
func TestBlockedRequestsAreTheJobsOwn(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s := State{Nodes: schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 2, GPUs: 8})}
	// Four GPUs busy on each node: eight free, none eight together.
	for i := 0; i < 2; i++ {
		id := fmt.Sprintf("half-%d", i)
		s.Jobs = append(s.Jobs, &model.Job{ID: id, Shape: model.Shape{GPUs: 4, Topology: model.TopologyNode},
			State: model.JobRunning, SubmittedAt: now.Add(-time.Hour), StartedAt: now.Add(-time.Hour)})
		s.Allocations = append(s.Allocations, model.Allocation{ID: "a-" + id, NodeID: schedtest.NodeName(i), GPUs: model.FullMask(4),
			OwnerKind: model.OwnerTraining, OwnerID: id, CreatedAt: now.Add(-time.Hour)})
	}
	for i, prio := range []int{50, 40} {
		s.Jobs = append(s.Jobs, &model.Job{ID: fmt.Sprintf("whole-%d", i), Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode},
			Priority: prio, State: model.JobPending, SubmittedAt: now.Add(-time.Duration(10-i) * time.Minute)})
	}
	p := newPlanner(&s, NewIndex(s.Nodes, s.Allocations, s.Config), now)
	p.training()
	if len(p.blocked) != 2 {
		t.Fatalf("blocked %+v; want both 8-GPU jobs, kept out by fragmentation", p.blocked)
	}
	for i, b := range p.blocked {
		if id, prio := fmt.Sprintf("whole-%d", i), []int{50, 40}[i]; b.req.OwnerID != id || b.req.Priority != prio {
			t.Errorf("blocked %d: owner %s at %d; want %s at %d", i, b.req.OwnerID, b.req.Priority, id, prio)
		}
	}
}

// The queue's buffers are kept once, whichever goroutine (so CPU) the
// next pass runs on: a sync.Pool kept a set per CPU, two sets of 200 MB
// at a million pending on two cores.
func TestQueueBuffersAreKeptOnce(t *testing.T) {
	s := busyState(64, 2, 3000, false)
	Plan(s, benchNow)
	first := queueSpare.take()
	if cap(first.table) < 3000 {
		t.Fatalf("the pass kept buffers for %d jobs, want 3000 or more", cap(first.table))
	}
	queueSpare.put(first)
	done := make(chan *queueBufs)
	go func() {
		Plan(s, benchNow)
		done <- queueSpare.take()
	}()
	if again := <-done; again != first {
		t.Fatal("a pass on another goroutine made buffers of its own")
	}
}
