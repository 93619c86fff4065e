package control

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// TestLiveJobsFollowTheTable: the loop's copy of the unfinished jobs,
// caught up from the cache's journal each pass, is what a full read of
// the table gives, through new jobs (ids in and out of order), state
// changes, finished jobs and deletes on a real etcd.
func TestLiveJobsFollowTheTable(t *testing.T) {
	ctx := context.Background()
	st, w := leaderStore(t)
	rng := rand.New(rand.NewPCG(3, 9))
	states := []model.JobState{model.JobPending, model.JobRunning, model.JobCompleted, model.JobFailed}
	jobs := map[string]model.Job{}
	live := newMirror(store.Jobs, jobID, unfinished)
	incremental := 0
	for round := 0; round < 40; round++ {
		txn := w.Txn()
		touched := map[string]bool{}
		for i := 0; i < 1+rng.IntN(12); i++ {
			ids := make([]string, 0, len(jobs))
			for id := range jobs {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			op := rng.IntN(10)
			if op >= 5 && len(ids) == 0 {
				op = 0
			}
			switch {
			case op < 5: // new: mostly a later id, sometimes an earlier one
				id := fmt.Sprintf("j%05d", 1000+round*20+i)
				if op == 0 {
					id = fmt.Sprintf("j%05d", rng.IntN(1000))
				}
				if touched[id] {
					continue
				}
				jobs[id], touched[id] = model.Job{ID: id, Name: "n", State: model.JobPending, Priority: rng.IntN(5)}, true
				txn.Put(store.Jobs, id, jobs[id])
			case op < 9:
				id := ids[rng.IntN(len(ids))]
				if touched[id] {
					continue
				}
				j := jobs[id]
				j.State, j.Priority = states[rng.IntN(len(states))], rng.IntN(5)
				jobs[id], touched[id] = j, true
				txn.Put(store.Jobs, id, j)
			default:
				id := ids[rng.IntN(len(ids))]
				if touched[id] {
					continue
				}
				delete(jobs, id)
				touched[id] = true
				txn.Delete(store.Jobs, id)
			}
		}
		rev, err := w.Commit(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Cache().WaitRev(ctx, rev); err != nil {
			t.Fatal(err)
		}
		var want, got []model.Job
		st.Cache().Read(func(v store.View) {
			before := live.read
			if before && v.ChangedSince(store.Jobs, live.rev, func(string) {}) {
				incremental++
			}
			for _, j := range live.sync(v) {
				got = append(got, *j)
			}
			v.Each(store.Jobs, func(_ string, e store.Entry) {
				if j := *e.Obj.(*model.Job); !j.State.Terminal() {
					want = append(want, j)
				}
			})
		})
		slices.SortFunc(want, func(a, b model.Job) int { return strings.Compare(a.ID, b.ID) })
		if !slices.EqualFunc(got, want, func(a, b model.Job) bool { return a.ID == b.ID && a.State == b.State && a.Priority == b.Priority }) {
			t.Fatalf("round %d: the loop's jobs %v, the table's %v", round, ids(got), ids(want))
		}
	}
	if incremental < 30 {
		t.Errorf("only %d of 40 reads caught up from the journal", incremental)
	}
}

func ids(js []model.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = fmt.Sprintf("%s:%s:%d", j.ID, j.State, j.Priority)
	}
	return out
}

// TestPatchMergesInOrder: patch's in-place merge gives what a sort of the
// changed set gives, for new ids anywhere in the order.
func TestPatchMergesInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 500; round++ {
		have := map[string]bool{}
		var list []model.Job
		for i := 0; i < rng.IntN(30); i++ {
			id := fmt.Sprintf("j%03d", rng.IntN(200))
			if !have[id] {
				have[id] = true
				list = append(list, model.Job{ID: id})
			}
		}
		slices.SortFunc(list, func(a, b model.Job) int { return strings.Compare(a.ID, b.ID) })
		var cs []entryChange[model.Job]
		want := maps.Clone(have)
		seen := map[string]bool{}
		for i := 0; i < rng.IntN(20); i++ {
			id := fmt.Sprintf("j%03d", rng.IntN(200))
			if seen[id] {
				continue
			}
			seen[id] = true
			live := rng.IntN(3) > 0
			cs = append(cs, entryChange[model.Job]{id: id, obj: model.Job{ID: id, Priority: 1}, live: live})
			if live {
				want[id] = true
			} else {
				delete(want, id)
			}
		}
		slices.SortFunc(cs, func(a, b entryChange[model.Job]) int { return strings.Compare(a.id, b.id) })
		got := patch(list, cs, func(j *model.Job) string { return j.ID })
		wantIDs := slices.Sorted(maps.Keys(want))
		var gotIDs []string
		for _, j := range got {
			gotIDs = append(gotIDs, j.ID)
		}
		if !slices.Equal(gotIDs, wantIDs) {
			t.Fatalf("round %d: patched %v, want %v", round, gotIDs, wantIDs)
		}
		for _, j := range got {
			if seen[j.ID] && j.Priority != 1 {
				t.Fatalf("round %d: %s not replaced", round, j.ID)
			}
		}
	}
}

// A node written forty times since the last read is one change, not
// forty: the copy is patched in place rather than read whole, and still
// matches the table.
func TestRepeatedWritesPatchTheCopy(t *testing.T) {
	ctx := context.Background()
	st, w := leaderStore(t)
	commit := func(txn *store.Txn) {
		t.Helper()
		rev, err := w.Commit(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Cache().WaitRev(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	txn := w.Txn()
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("n%03d", (i*37)%100) // not in id order
		txn.Put(store.Nodes, id, model.Node{ID: id, Pod: "p", Model: "H100", GPUs: 8})
	}
	commit(txn)
	nodes := newMirror(store.Nodes, nodeID, nil)
	var first *model.Node
	st.Cache().Read(func(v store.View) { first = &nodes.sync(v)[0] })
	for k := 0; k < 40; k++ {
		txn := w.Txn()
		txn.Put(store.Nodes, "n042", model.Node{ID: "n042", Pod: "p", Model: "H100", GPUs: 8, BootEpoch: uint64(k + 1)})
		commit(txn)
	}
	st.Cache().Read(func(v store.View) {
		got := nodes.sync(v)
		if &got[0] != first {
			t.Error("forty writes of one node read the table whole")
		}
		if len(got) != 100 {
			t.Fatalf("%d nodes in the copy", len(got))
		}
		for i, n := range got {
			if want := fmt.Sprintf("n%03d", i); n.ID != want {
				t.Fatalf("copy[%d] is %s, want %s", i, n.ID, want)
			}
		}
		if got[42].BootEpoch != 40 {
			t.Errorf("n042 at boot epoch %d in the copy, 40 in the table", got[42].BootEpoch)
		}
	})
}

// A collect whose apply never came (a read cut short) leaves the copy at
// its old revision: the next collect takes everything since then, and
// replaces a whole copy the first one took, so what apply returns is the
// table. Deletes, updates and new entries, in both orders.
func TestCollectWithoutApplyLosesNothing(t *testing.T) {
	ctx := context.Background()
	st, w := leaderStore(t)
	commit := func(fn func(*store.Txn)) {
		t.Helper()
		txn := w.Txn()
		fn(txn)
		rev, err := w.Commit(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Cache().WaitRev(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	node := func(id string, epoch uint64) model.Node {
		return model.Node{ID: id, Pod: "p", Model: "H100", GPUs: 8, BootEpoch: epoch}
	}
	commit(func(txn *store.Txn) {
		for i := 0; i < 20; i++ {
			id := fmt.Sprintf("n%03d", i)
			txn.Put(store.Nodes, id, node(id, 1))
		}
	})
	nodes := newMirror(store.Nodes, nodeID, nil)
	collect := func() { st.Cache().Read(func(v store.View) { nodes.collect(v) }) }
	collect() // the first read takes the table whole; never applied
	commit(func(txn *store.Txn) { txn.Put(store.Nodes, "n003", node("n003", 2)) })
	collect() // one change, since nothing: the whole table again
	commit(func(txn *store.Txn) {
		txn.Delete(store.Nodes, "n007")
		txn.Put(store.Nodes, "n020", node("n020", 1))
	})
	got := nodes.apply()
	st.Cache().Read(func(v store.View) {
		if v.Rev() == nodes.rev {
			t.Fatal("the test's last write is in the copy before its collect")
		}
	})
	if len(got) != 20 || got[3].ID != "n003" || got[3].BootEpoch != 2 {
		t.Fatalf("after two collects and one apply: %d nodes, want 20 with n003 at epoch 2: %v", len(got), got)
	}
	// Now incremental: a collect not applied, then another.
	collect()
	commit(func(txn *store.Txn) { txn.Put(store.Nodes, "n010", node("n010", 3)) })
	collect()
	got = nodes.apply()
	var want []string
	st.Cache().Read(func(v store.View) {
		v.Each(store.Nodes, func(id string, e store.Entry) {
			want = append(want, fmt.Sprintf("%s@%d", id, e.Obj.(model.Node).BootEpoch))
		})
	})
	slices.Sort(want)
	var have []string
	for _, n := range got {
		have = append(have, fmt.Sprintf("%s@%d", n.ID, n.BootEpoch))
	}
	if !slices.Equal(have, want) {
		t.Fatalf("copy %v, table %v", have, want)
	}
}

// leaderStore opens a store on real etcd and leads it, for tests that
// write tables themselves.
func leaderStore(t *testing.T) (*store.Store, *store.Writer) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l, err := st.Campaign(ctx, "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Resign(ctx) })
	return st, l.Writer()
}

// BenchmarkPatchRemoves: the loop's copy of 100k allocations catching up
// on one that ended, as a pass does each time a job finishes at fleet
// scale.
func BenchmarkPatchRemoves(b *testing.B) {
	list := make([]model.Allocation, 100_000)
	for i := range list {
		list[i] = model.Allocation{ID: fmt.Sprintf("a-%07d", i), NodeID: fmt.Sprintf("n-%05d", i/8), OwnerID: fmt.Sprintf("j-%07d", i)}
	}
	for i := 0; b.Loop(); i++ {
		k := 1000 + i%90_000
		gone := list[k]
		list = patch(list, []entryChange[model.Allocation]{{id: gone.ID}}, allocID)
		list = patch(list, []entryChange[model.Allocation]{{id: gone.ID, obj: gone, live: true}}, allocID)
	}
}
