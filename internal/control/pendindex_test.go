package control

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// The index answers what maps built from the entries answer: a training
// job's last entry, a deployment's first, and a training job's place
// among the distinct training ids in entry order. Ids are drawn from a
// small set so that repeats, mixed kinds and probe chains all occur.
func TestPendingIndexAgreesWithMaps(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOfN(rapid.StringMatching(`[a-e]{1,3}`), 0, 60).Draw(t, "ids")
		entries := make([]sched.Pending, len(ids))
		for i, id := range ids {
			kind := model.OwnerTraining
			if rapid.Bool().Draw(t, fmt.Sprint("inference", i)) {
				kind = model.OwnerInference
			}
			entries[i] = sched.Pending{Kind: kind, OwnerID: id, Missing: i}
		}
		want, pos := map[string]*sched.Pending{}, map[string]int{}
		for i := range entries {
			e := &entries[i]
			if _, ok := want[e.OwnerID]; e.Kind != model.OwnerInference || !ok {
				want[e.OwnerID] = e
			}
			if _, ok := pos[e.OwnerID]; e.Kind != model.OwnerInference && !ok {
				pos[e.OwnerID] = len(pos) + 1
			}
		}
		ix := newPendingIndex(entries)
		for _, id := range append(ids, "zz", "") {
			if got := ix.get(id); got != want[id] {
				t.Fatalf("get(%q) = %+v, want %+v", id, got, want[id])
			}
			p, ok := ix.position(id)
			if wp, wok := pos[id]; p != wp || ok != wok {
				t.Fatalf("position(%q) = %d %v, want %d %v", id, p, ok, wp, wok)
			}
		}
	})
}

// A pass that left nothing pending answers every lookup with nothing.
func TestPendingIndexOfNoEntries(t *testing.T) {
	ix := newPendingIndex(nil)
	if ix.get("j-1") != nil {
		t.Fatal("an empty index found an entry")
	}
	if _, ok := ix.position("j-1"); ok {
		t.Fatal("an empty index found a position")
	}
}
