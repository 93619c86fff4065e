package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
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

// lead campaigns as id and fails the test if that fails.
func lead(t *testing.T, s *store.Store, id string, ttl time.Duration) *store.Leadership {
	t.Helper()
	l, err := s.Campaign(context.Background(), id, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func open(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), store.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWriteReadRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir)
	l := lead(t, s, "a", 2*time.Second)
	w := l.Writer()
	job := model.Job{ID: "j1", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, State: model.JobPending}
	if _, err := w.Commit(ctx, w.Txn().Create(store.Jobs, "j1", job)); err != nil {
		t.Fatal(err)
	}
	// Read-your-write: the cache holds it on return.
	if got, ok := store.Get[model.Job](s.Cache(), store.Jobs, "j1"); !ok || got.Shape.GPUs != 8 {
		t.Fatalf("cache after commit: %+v %v", got, ok)
	}
	// Create of an existing key is a conflict and applies nothing.
	_, err := w.Commit(ctx, w.Txn().Put(store.Jobs, "j2", job).Create(store.Jobs, "j1", job))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create existing: %v, want ErrConflict", err)
	}
	if _, ok := store.Get[model.Job](s.Cache(), store.Jobs, "j2"); ok {
		t.Fatal("a refused transaction applied part of itself")
	}
	if err := l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if got, ok := store.Get[model.Job](s.Cache(), store.Jobs, "j1"); !ok || got.ID != "j1" {
		t.Fatalf("after restart: %+v %v", got, ok)
	}
}

func TestStaleFenceRefused(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	old := lead(t, s, "old", time.Second)
	stale := old.Writer()
	if err := old.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	cur := lead(t, s, "new", time.Second)
	defer cur.Resign(ctx)
	if cur.Fence() <= old.Fence() {
		t.Fatalf("fence did not increase: %d then %d", old.Fence(), cur.Fence())
	}
	_, err := stale.Commit(ctx, stale.Txn().Put(store.Jobs, "x", model.Job{ID: "x"}))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale writer: %v, want ErrFenced", err)
	}
	if _, ok := store.Get[model.Job](s.Cache(), store.Jobs, "x"); ok {
		t.Fatal("stale write applied")
	}
	w := cur.Writer()
	if _, err := w.Commit(ctx, w.Txn().Put(store.Jobs, "y", model.Job{ID: "y"})); err != nil {
		t.Fatalf("current leader: %v", err)
	}
	who, fence, err := s.Leader(ctx)
	if err != nil || who != "new" || fence != cur.Fence() {
		t.Fatalf("leader = %q %d %v", who, fence, err)
	}
}

func TestUnchangedCondition(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	l := lead(t, s, "a", time.Second)
	defer l.Resign(ctx)
	w := l.Writer()
	rev, err := w.Commit(ctx, w.Txn().Put(store.Nodes, "n1", model.Node{ID: "n1", GPUs: 8}))
	if err != nil {
		t.Fatal(err)
	}
	stale := rev
	cur, err := w.Commit(ctx, w.Txn().Put(store.Nodes, "n1", model.Node{ID: "n1", GPUs: 8, Draining: true}))
	if err != nil {
		t.Fatal(err)
	}
	// A key named twice is one condition, the stricter, in either order.
	for _, revs := range [][2]int64{{cur, stale}, {stale, cur}} {
		_, err := w.Commit(ctx, w.Txn().Unchanged(store.Nodes, "n1", revs[0]).Unchanged(store.Nodes, "n1", revs[1]).
			Put(store.Allocations, "a0", model.Allocation{ID: "a0", NodeID: "n1"}))
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("n1 unchanged since %d and since %d (modified at %d): %v, want ErrConflict", revs[0], revs[1], cur, err)
		}
	}
	if _, err := w.Commit(ctx, w.Txn().Unchanged(store.Nodes, "n1", cur).Unchanged(store.Nodes, "n1", cur+1).
		Put(store.Allocations, "a0", model.Allocation{ID: "a0", NodeID: "n1"})); err != nil {
		t.Fatalf("n1 named twice, both current: %v", err)
	}
	_, err = w.Commit(ctx, w.Txn().Unchanged(store.Nodes, "n1", rev).Put(store.Allocations, "a1", model.Allocation{ID: "a1", NodeID: "n1"}))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("write based on a stale read: %v, want ErrConflict", err)
	}
	// A key deleted after the read: its revisions compare as 0, which is
	// "not modified since" unless presence is checked too.
	rev, err = w.Commit(ctx, w.Txn().Put(store.Deployments, "d1", model.Deployment{ID: "d1"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, w.Txn().Delete(store.Deployments, "d1")); err != nil {
		t.Fatal(err)
	}
	_, err = w.Commit(ctx, w.Txn().Unchanged(store.Deployments, "d1", rev).Put(store.Allocations, "a2", model.Allocation{ID: "a2", OwnerID: "d1"}))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("write based on a key deleted since the read: %v, want ErrConflict", err)
	}
	if _, err := w.Commit(ctx, w.Txn().Unchanged(store.Nodes, "n1", rev).Put(store.Allocations, "a3", model.Allocation{ID: "a3", NodeID: "n1"})); err != nil {
		t.Fatalf("write based on a current read: %v", err)
	}
	if _, err := w.Commit(ctx, w.Txn().Absent(store.Nodes, "n1").Put(store.Nodes, "n1", model.Node{ID: "n1"})); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create over an existing key: %v, want ErrConflict", err)
	}
	if _, err := w.Commit(ctx, w.Txn().Absent(store.Nodes, "n2").Put(store.Nodes, "n2", model.Node{ID: "n2"})); err != nil {
		t.Fatalf("create of an absent key: %v", err)
	}
}

// TestCandidatesChanged: a server joining the election is signalled, so
// heartbeats can name it at once rather than after the list's cache ages.
func TestCandidatesChanged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := open(t, t.TempDir())
	defer s.Close()
	l := lead(t, s, "a", time.Second)
	defer l.Resign(context.Background())
	ch := s.CandidatesChanged(ctx)
	wait := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no signal %s within 10 s", what)
		}
	}
	wait("once the watch began")
	select {
	case <-ch:
		t.Fatal("signalled with nothing changed")
	case <-time.After(300 * time.Millisecond):
	}
	// b waits in line behind a: Campaign returns only once b leads.
	bctx, bstop := context.WithCancel(ctx)
	defer bstop()
	go s.Campaign(bctx, "b", time.Second)
	wait("when b campaigned")
	got, err := s.Candidates(ctx)
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("candidates after the signal: %v %v, want [a b]", got, err)
	}
}

// TestLoadInPages: a table larger than one read is loaded whole, at one
// revision, on restart (a million jobs are over the client's receive
// limit in one read).
func TestLoadInPages(t *testing.T) {
	defer store.SetLoadPage(7)()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir)
	l := lead(t, s, "a", 2*time.Second)
	w := l.Writer()
	const n = 25
	for i := range n {
		id := fmt.Sprintf("j%02d", i)
		if _, err := w.Commit(ctx, w.Txn().Put(store.Jobs, id, model.Job{ID: id, State: model.JobPending})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(ctx, w.Txn().Put(store.Nodes, "n1", model.Node{ID: "n1", GPUs: 8})); err != nil {
		t.Fatal(err)
	}
	l.Resign(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	for i := range n {
		id := fmt.Sprintf("j%02d", i)
		if got, ok := store.Get[model.Job](s.Cache(), store.Jobs, id); !ok || got.ID != id {
			t.Fatalf("after restart, job %s: %+v %v", id, got, ok)
		}
	}
	if _, ok := store.Get[model.Node](s.Cache(), store.Nodes, "n1"); !ok {
		t.Fatal("after restart: node n1 missing (the last page)")
	}
}

// A port the store picked for its member and another process took before
// etcd bound it: the start picks again instead of failing the server.
func TestPickedPortTakenIsPickedAgain(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	lost := "http://" + taken.Addr().String()
	picks := 0
	defer store.PickURLs(func() (string, error) {
		picks++
		if picks == 1 {
			return lost, nil // the client port, taken before the bind
		}
		return store.FreeURL()
	})()
	s := open(t, t.TempDir())
	defer s.Close()
	if eps := s.Endpoints(); len(eps) != 1 || eps[0] == lost {
		t.Fatalf("endpoints %v: want one, not the taken %s", eps, lost)
	}
	if picks < 4 {
		t.Fatalf("%d picks: want the two of the failed start and two more", picks)
	}
}
