package sched

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/model"
	"github.com/google/go-cmp/cmp"
)

// migFleet is one 2-GPU node in the sharing pool whose GPU 0 is
// partitioned 3g+2g+1g+1g (428, 285, 142, 142 milli).
func migFleet() []model.Node {
	nodes := shareFleet("sharing", 0, 1, 2)
	nodes[0].MIG = [][]int{{428, 285, 142, 142}}
	return nodes
}

// A share runs alone on one MIG instance: on a partitioned GPU it fits
// only where a free instance holds it, and takes the smallest that does.
func TestMIGSharesFitInstances(t *testing.T) {
	oneGPU := func() *Index {
		nodes := shareFleet("sharing", 0, 1, 1)
		nodes[0].MIG = [][]int{{428, 285, 142, 142}}
		return NewIndex(nodes, nil, Config{})
	}
	place := func(ix *Index, milli int) *Reason {
		r := shareReq(fmt.Sprint("s", milli), milli)
		_, why := ix.Place(&r, Pools{})
		return why
	}
	ix := oneGPU()
	if why := place(ix, 500); why == nil || !strings.Contains(why.Message, "is 428 (n000 GPU 0: its largest free MIG instance)") {
		t.Fatalf("a 500m share on 3g+2g+1g+1g: %v, want a reason naming the 428m instance", why)
	}
	// Four 100s fill the four instances, 600 milli unused.
	for k := range 4 {
		if why := place(ix, 100); why != nil {
			t.Fatalf("100m share %d: %v", k, why)
		}
	}
	if why := place(ix, 100); why == nil || !strings.Contains(why.Message, "is 0") {
		t.Fatalf("a fifth 100m share: %v, want none placed: every instance is taken", why)
	}

	// A 300 takes the 3g; the largest left is the 2g.
	ix = oneGPU()
	if why := place(ix, 300); why != nil {
		t.Fatal(why)
	}
	if got := milliOf(t, ix, "n000", 0); got != 285 {
		t.Fatalf("after a 300m share: %d free for the next, want 285 (the 2g)", got)
	}
	if s := ix.Summary(false); s.LargestShare != 285 || s.SharedGPUs != 1 || s.SharedFreeMilli != 285+142+142 {
		t.Fatalf("summary: largest share %d, shared GPUs %d, free on them %d; want 285, 1, %d",
			s.LargestShare, s.SharedGPUs, s.SharedFreeMilli, 285+142+142)
	}
}

// Across GPUs the placer keeps big instances for big shares: a 100m
// share goes to a GPU's free 1g rather than to the last 3g of another.
func TestMIGKeepsBigInstances(t *testing.T) {
	nodes := shareFleet("sharing", 0, 1, 2)
	nodes[0].MIG = [][]int{{428, 285, 142, 142}, {428, 285, 142, 142}}
	// GPU 0 has only its 3g left; GPU 1 is untouched.
	var allocs []model.Allocation
	for k, m := range []int{250, 120, 120} {
		allocs = append(allocs, shareAlloc(fmt.Sprint("a", k), "n000", 0, m))
	}
	ix := NewIndex(nodes, allocs, Config{})
	r := shareReq("s", 100)
	pl, why := ix.Place(&r, Pools{})
	if why != nil || gpuOf(pl.Parts[0].GPUs) != 1 {
		t.Fatalf("a 100m share: %+v %v, want GPU 1's 1g, not GPU 0's last 3g", pl, why)
	}
}

// The free instances follow from the shares however they arrived: each
// share, largest first, on the smallest instance that holds it.
func TestMIGFree(t *testing.T) {
	tests := []struct {
		shares []int
		want   []int
	}{
		{nil, []int{142, 142, 285, 428}},
		{[]int{100}, []int{142, 285, 428}},
		{[]int{100, 300}, []int{142, 285}},
		{[]int{200, 140, 140}, []int{428}},
		{[]int{285, 428, 142, 142}, []int{}},
		// 500 fits no instance (left from before a repartition): it is
		// charged the largest, so nothing is promised that is not there.
		{[]int{500}, []int{142, 142, 285}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.shares), func(t *testing.T) {
			var allocs []model.Allocation
			for k, m := range tt.shares {
				allocs = append(allocs, shareAlloc(fmt.Sprint("a", k), "n000", 0, m))
			}
			ix := NewIndex(migFleet(), nil, Config{})
			for _, a := range allocs {
				ix.assignShare(ix.byID["n000"], a.GPUs, a.GPUMilli, 0, 0, 0) // no instance recorded, fitting or not
			}
			if got := ix.migFree(0, 0); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Fatalf("free instances %v, want %v", got, tt.want)
			}
		})
	}
}

// Tentative placements on a MIG GPU roll back to the same free instances.
func TestMIGRollback(t *testing.T) {
	ix := NewIndex(migFleet(), []model.Allocation{shareAlloc("a", "n000", 0, 200)}, Config{})
	before := stateOf(ix)
	cp := ix.Checkpoint()
	for _, m := range []int{100, 400, 100} {
		r := shareReq(fmt.Sprint("s", m), m)
		if _, why := ix.Place(&r, Pools{}); why != nil {
			t.Fatal(why)
		}
	}
	if err := ix.Release(shareAlloc("a", "n000", 0, 200)); !err {
		t.Fatal("release refused")
	}
	ix.Rollback(cp)
	if diff := cmp.Diff(before, stateOf(ix)); diff != "" {
		t.Fatalf("after rollback (-before +after):\n%s", diff)
	}
	if got := ix.migFree(0, 0); !slices.Equal(got, []int{142, 142, 428}) {
		t.Fatalf("free instances after rollback %v, want 142 142 428 (the 2g holding the 200)", got)
	}
}

// Whole-GPU jobs in the sharing pool leave partitioned GPUs to shares.
func TestMIGGPUsStayWithShares(t *testing.T) {
	pools := Pools{Small: "sharing", SmallMaxGPUs: 4}
	ix := NewIndex(migFleet(), nil, Config{Pools: pools})
	one := wholeReq("one", 1)
	pl, why := ix.Place(&one, pools)
	if why != nil || gpuOf(pl.Parts[0].GPUs) != 1 {
		t.Fatalf("a 1-GPU job: %+v %v, want GPU 1, not the partitioned GPU 0", pl, why)
	}
	two := wholeReq("two", 1)
	if pl, why := ix.Place(&two, pools); why == nil {
		t.Fatalf("a second 1-GPU job took %+v: only the partitioned GPU is left", pl)
	}
}

// A share keeps the instance it was given: the index knows which one, so
// it agrees with the node after shares leave in any order. On 428+285,
// two 250s take the 285 and then the 428; when the first leaves, the 285
// is free, not the 428, and a 400 waits.
func TestMIGInstancesAreRecorded(t *testing.T) {
	nodes := shareFleet("sharing", 0, 1, 1)
	nodes[0].MIG = [][]int{{428, 285}}
	ix := NewIndex(nodes, nil, Config{})
	var parts []Part
	for _, id := range []string{"a", "b"} {
		r := shareReq(id, 250)
		pl, why := ix.Place(&r, Pools{})
		if why != nil {
			t.Fatal(why)
		}
		parts = append(parts, pl.Parts[0])
	}
	if parts[0].MIGInstance != 2 || parts[1].MIGInstance != 1 {
		t.Fatalf("instances %d and %d, want 2 (the 285) then 1 (the 428)", parts[0].MIGInstance, parts[1].MIGInstance)
	}
	a := model.Allocation{ID: "a", NodeID: "n000", GPUs: parts[0].GPUs, GPUMilli: 250, MIGInstance: parts[0].MIGInstance}
	if !ix.Release(a) {
		t.Fatal("release refused")
	}
	if got := milliOf(t, ix, "n000", 0); got != 285 {
		t.Fatalf("after the first share leaves: %d free for one share, want 285 (the 428 is still held)", got)
	}
	big := shareReq("big", 400)
	if _, why := ix.Place(&big, Pools{}); why == nil {
		t.Fatal("a 400m share was placed: only the 285 is free")
	}
	// The same, from the table: allocations name their instances.
	b := model.Allocation{ID: "b", NodeID: "n000", GPUs: parts[1].GPUs, GPUMilli: 250, MIGInstance: 1}
	if got := NewIndex(nodes, []model.Allocation{b}, Config{}).migFree(0, 0); !slices.Equal(got, []int{285}) {
		t.Fatalf("index from the table: free instances %v, want [285]", got)
	}
}
