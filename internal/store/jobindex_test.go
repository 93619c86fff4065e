package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// TestJobIndex: the ordered job indexes answer what a scan of the table
// answers (queue ranks, filtered pages in submit order), through puts,
// state changes and deletes on a real etcd, and again after a restart
// rebuilds the cache from the table.
func TestJobIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	l := lead(t, s, "a", 2*time.Second)
	w := l.Writer()
	rng := rand.New(rand.NewPCG(7, 7))
	states := []model.JobState{model.JobPending, model.JobRunning, model.JobCompleted}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := map[string]model.Job{}
	var rev int64
	made := 0
	for round := 0; round < 12; round++ {
		txn := w.Txn()
		touched := map[string]bool{} // etcd refuses a key twice in one txn
		for i := 0; i < 25; i++ {
			op, old := rng.IntN(10), pick(rng, jobs)
			if op >= 6 && (old == "" || touched[old]) {
				continue
			}
			switch {
			case op < 6: // a new job; some submitted in the same second
				made++
				id := fmt.Sprintf("j%04d", made)
				j := model.Job{ID: id, Name: fmt.Sprintf("n%d", rng.IntN(3)), Team: []string{"a", "b"}[rng.IntN(2)], Priority: rng.IntN(3) * 10,
					State: model.JobPending, SubmittedAt: base.Add(time.Duration(rng.IntN(40)) * time.Second)}
				jobs[id], touched[id] = j, true
				txn.Put(store.Jobs, id, j)
			case op < 9: // a state change
				j := jobs[old]
				j.State = states[rng.IntN(len(states))]
				jobs[old], touched[old] = j, true
				txn.Put(store.Jobs, old, j)
			default:
				delete(jobs, old)
				touched[old] = true
				txn.Delete(store.Jobs, old)
			}
		}
		var err error
		if rev, err = w.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
		if err := s.Cache().WaitRev(ctx, rev); err != nil {
			t.Fatal(err)
		}
		checkIndex(t, s, fmt.Sprintf("round %d", round))
	}
	l.Resign(ctx)
	s.Close()
	s = open(t, dir)
	defer s.Close()
	checkIndex(t, s, "after a restart")
}

// pick chooses one of the jobs, "" when there are none.
func pick(rng *rand.Rand, jobs map[string]model.Job) string {
	if len(jobs) == 0 {
		return ""
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids[rng.IntN(len(ids))]
}

func checkIndex(t *testing.T, s *store.Store, when string) {
	t.Helper()
	s.Cache().Read(func(v store.View) {
		var all []model.Job
		v.Each(store.Jobs, func(_ string, e store.Entry) { all = append(all, *e.Obj.(*model.Job)) })
		slices.SortFunc(all, func(a, b model.Job) int {
			if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		for _, j := range all {
			want := 0
			for _, o := range all {
				if o.State == model.JobPending && o.ID != j.ID && (o.Priority > j.Priority || o.Priority == j.Priority &&
					(o.SubmittedAt.Before(j.SubmittedAt) || o.SubmittedAt.Equal(j.SubmittedAt) && o.ID < j.ID)) {
					want++
				}
			}
			if got := v.PendingAhead(j.Priority, j.SubmittedAt, j.ID); got != want {
				t.Errorf("%s: %s (priority %d): %d pending ahead, a scan says %d", when, j.ID, j.Priority, got, want)
			}
		}
		for _, f := range []store.JobFilter{{}, {Team: "a"}, {States: []model.JobState{model.JobPending, model.JobRunning}}, {Team: "b", Name: "n1"}} {
			var want []string
			for _, j := range all {
				if (f.Team == "" || j.Team == f.Team) && (f.Name == "" || j.Name == f.Name) && (f.States == nil || slices.Contains(f.States, j.State)) {
					want = append(want, j.ID)
				}
			}
			// Pages of 4, each continuing after the last one listed.
			var got []string
			var after *store.JobCursor
			for page := 0; page <= len(all); page++ {
				var ids []model.Job
				v.JobsAfter(after, f, func(j model.Job) bool {
					ids = append(ids, j)
					return len(ids) < 4
				})
				for _, j := range ids {
					got = append(got, j.ID)
				}
				if len(ids) < 4 {
					break
				}
				last := ids[len(ids)-1]
				after = &store.JobCursor{At: last.SubmittedAt, ID: last.ID}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: pages of %+v: %v, a scan says %v", when, f, got, want)
			}
		}
	})
}
