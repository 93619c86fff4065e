package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched/schedtest"
)

// Tests for GPU sharing (gpu_milli): the share placer, the index's
// per-GPU share accounting, and how a pass treats fractional requests.

// shareFleet builds nodes in one pool, named from first on.
func shareFleet(pool string, first, nodes, gpus int) []model.Node {
	return schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: nodes, GPUs: gpus, Pool: pool, FirstNode: first})
}

func shareReq(id string, milli int) model.Request {
	return model.Request{Shape: model.Shape{GPUs: 1, GPUMilli: milli, Topology: model.TopologyNode},
		Kind: model.OwnerTraining, OwnerID: id}
}

func wholeReq(id string, gpus int) model.Request {
	return model.Request{Shape: model.Shape{GPUs: gpus, Topology: model.TopologyNode}, Kind: model.OwnerTraining, OwnerID: id}
}

func shareAlloc(id, node string, gpu, milli int) model.Allocation {
	return model.Allocation{ID: id, NodeID: node, GPUs: model.MaskOf(gpu), GPUMilli: milli, CPUMilli: 1000, MemoryMiB: 1024,
		OwnerKind: model.OwnerTraining, OwnerID: id}
}

// milliOf is freeMilli by node id and GPU number.
func milliOf(t testing.TB, ix *Index, node string, gpu int) int {
	t.Helper()
	i, ok := ix.byID[node]
	if !ok {
		t.Fatalf("no node %s in the index", node)
	}
	return ix.freeMilli(i, model.MaskOf(gpu))
}

// indexState is everything a rollback must restore: the summary, every
// GPU's free milli, every node's free mask, cpu and memory.
type indexState struct {
	Summary TopologySummary
	Milli   map[string][]int
	Free    map[string]model.GPUMask
	CPU     map[string]int64
	Mem     map[string]int64
}

func stateOf(ix *Index) indexState {
	s := indexState{Summary: ix.Summary(true), Milli: map[string][]int{}, Free: map[string]model.GPUMask{},
		CPU: map[string]int64{}, Mem: map[string]int64{}}
	for i := range ix.nodes {
		ns := &ix.nodes[i]
		m := make([]int, ns.node.GPUs)
		for g := range m {
			m[g] = ix.freeMilli(i, model.MaskOf(g))
		}
		s.Milli[ns.node.ID] = m
		s.Free[ns.node.ID] = ns.free
		s.CPU[ns.node.ID] = ns.cpu
		s.Mem[ns.node.ID] = ns.mem
	}
	return s
}

// --- 2. Index accounting -------------------------------------------------

func TestIndexShareAccounting(t *testing.T) {
	nodes := shareFleet("sharing", 1, 1, 8) // n001
	a300, a500 := shareAlloc("a300", "n001", 2, 300), shareAlloc("a500", "n001", 2, 500)
	ix := NewIndex(nodes, []model.Allocation{a300, a500}, Config{})

	for g := range 8 {
		want := 1000
		if g == 2 {
			want = 200
		}
		if got := milliOf(t, ix, "n001", g); got != want {
			t.Fatalf("freeMilli(n001, GPU %d) = %d, want %d", g, got, want)
		}
	}
	if free := ix.nodes[ix.byID["n001"]].free; free.Has(2) || free.Count() != 7 {
		t.Fatalf("free mask %s: the shared GPU 2 must be out of it, the other 7 in", free)
	}
	if cpu := ix.nodes[ix.byID["n001"]].cpu; cpu != nodes[0].CPUMilli-2000 {
		t.Fatalf("free cpu %d, want the node's %d less the shares' 2000", cpu, nodes[0].CPUMilli)
	}
	s := ix.Summary(true)
	if s.LargestPlaceable.Node != 7 || s.FreeGPUs != 7 || s.FreeByNode["n001"] != 7 || s.FreeNodesFull != 0 {
		t.Fatalf("summary %+v: want 7 free GPUs on n001 and no whole node", s)
	}
	if s.SharedGPUs != 1 || s.SharedFreeMilli != 200 || s.LargestShare != 999 {
		t.Fatalf("summary shares %d/%d/%d, want 1 shared GPU, 200 milli free on it, largest share 999",
			s.SharedGPUs, s.SharedFreeMilli, s.LargestShare)
	}
	fits8 := func() bool {
		cp := ix.Checkpoint()
		defer ix.Rollback(cp)
		r := wholeReq("w", 8)
		_, why := ix.Place(&r, Pools{})
		return why == nil
	}
	if fits8() {
		t.Fatalf("an 8-GPU request fits a node one of whose GPUs is shared")
	}

	// Releasing one share keeps the GPU shared; the last one frees it whole.
	if !ix.Release(a500) {
		t.Fatalf("Release(a500) = false")
	}
	if got := milliOf(t, ix, "n001", 2); got != 700 {
		t.Fatalf("after releasing 500 of 800: freeMilli %d, want 700", got)
	}
	if ix.Largest().Node != 7 || fits8() {
		t.Fatalf("after one of two shares left: largest %+v, want the GPU still shared", ix.Largest())
	}
	if !ix.Release(a300) {
		t.Fatalf("Release(a300) = false")
	}
	if got := milliOf(t, ix, "n001", 2); got != 1000 {
		t.Fatalf("after the last share left: freeMilli %d, want 1000", got)
	}
	if ix.Largest().Node != 8 || !fits8() {
		t.Fatalf("after the last share left: largest %+v, want the whole node free", ix.Largest())
	}
	if diff := cmp.Diff(stateOf(NewIndex(nodes, nil, Config{})), stateOf(ix)); diff != "" {
		t.Fatalf("after releasing every share the index differs from an empty one (-empty +got):\n%s", diff)
	}
}

func TestIndexAssignShare(t *testing.T) {
	nodes := shareFleet("sharing", 1, 1, 8)
	nodes[0].QuarantinedGPUs = model.MaskOf(7)
	base := []model.Allocation{
		shareAlloc("a300", "n001", 2, 300), shareAlloc("a500", "n001", 2, 500),
		{ID: "w5", NodeID: "n001", GPUs: model.MaskOf(5), OwnerKind: model.OwnerTraining, OwnerID: "w5"},
	}
	tests := []struct {
		name  string
		alloc model.Allocation
		ok    bool
		gpu   int // whose freeMilli to check afterwards
		after int
	}{
		{"more than the shared GPU has left", shareAlloc("x", "n001", 2, 300), false, 2, 200},
		{"exactly what the shared GPU has left", shareAlloc("x", "n001", 2, 200), true, 2, 0},
		{"a share of a free GPU", shareAlloc("x", "n001", 0, 999), true, 0, 1},
		{"a share of a GPU held whole", shareAlloc("x", "n001", 5, 100), false, 5, 0},
		{"a share of a quarantined GPU", shareAlloc("x", "n001", 7, 100), false, 7, 0},
		{"a share of a GPU beyond the node", shareAlloc("x", "n001", 9, 100), false, 0, 1000},
		{"a share on an unknown node", shareAlloc("x", "nope", 0, 100), false, 0, 1000},
		{"a whole GPU that is shared", model.Allocation{ID: "x", NodeID: "n001", GPUs: model.MaskOf(2)}, false, 2, 200},
		{"a whole free GPU", model.Allocation{ID: "x", NodeID: "n001", GPUs: model.MaskOf(0)}, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex(nodes, base, Config{})
			before := stateOf(ix)
			if got := ix.Assign(tt.alloc); got != tt.ok {
				t.Fatalf("Assign = %v, want %v", got, tt.ok)
			}
			if !tt.ok {
				if diff := cmp.Diff(before, stateOf(ix)); diff != "" {
					t.Fatalf("a refused Assign changed the index:\n%s", diff)
				}
			}
			if got := milliOf(t, ix, "n001", tt.gpu); got != tt.after {
				t.Fatalf("freeMilli(GPU %d) = %d, want %d", tt.gpu, got, tt.after)
			}
			if tt.ok {
				// What Assign recorded, a fresh build from the same ledger has.
				fresh := NewIndex(nodes, append(slices.Clone(base), tt.alloc), Config{})
				if diff := cmp.Diff(stateOf(fresh), stateOf(ix)); diff != "" {
					t.Fatalf("Assign differs from a fresh build (-fresh +got):\n%s", diff)
				}
			}
		})
	}
}

// --- 3. Rollback ---------------------------------------------------------

func TestRollbackRestoresShares(t *testing.T) {
	nodes := shareFleet("sharing", 0, 2, 4)
	held := shareAlloc("held", "n000", 1, 600)
	ix := NewIndex(nodes, []model.Allocation{held}, Config{})
	before := stateOf(ix)
	cp := ix.Checkpoint()

	ix.Release(held) // a share release is journaled too
	var placed []Placement
	for i, r := range []model.Request{shareReq("s1", 300), shareReq("s2", 700), wholeReq("w", 2), shareReq("s3", 450)} {
		pl, why := ix.Place(&r, Pools{})
		if why != nil {
			t.Fatalf("request %d (%+v): %v", i, r.Shape, why)
		}
		placed = append(placed, pl)
	}
	mid := stateOf(ix)
	if cmp.Equal(before, mid) {
		t.Fatalf("placing shares left the index as it was")
	}
	ix.Rollback(cp)
	if diff := cmp.Diff(before, stateOf(ix)); diff != "" {
		t.Fatalf("rollback did not restore the index (-before +after):\n%s", diff)
	}
	if len(ix.journal) != cp {
		t.Fatalf("journal has %d entries after rollback to %d", len(ix.journal), cp)
	}
	// The restored index decides as the original did.
	ix.Release(held)
	for i, r := range []model.Request{shareReq("s1", 300), shareReq("s2", 700), wholeReq("w", 2), shareReq("s3", 450)} {
		pl, why := ix.Place(&r, Pools{})
		if why != nil || !cmp.Equal(pl, placed[i]) {
			t.Fatalf("after rollback request %d placed %+v (%v), first time %+v", i, pl, why, placed[i])
		}
	}
	if diff := cmp.Diff(mid, stateOf(ix)); diff != "" {
		t.Fatalf("replay after rollback differs:\n%s", diff)
	}
}

// --- 4. The sharing pool -------------------------------------------------

func TestPlaceSharedOnlyInSharingPool(t *testing.T) {
	for _, pools := range []Pools{{}, DefaultPools()} {
		t.Run(fmt.Sprintf("configured=%v", pools.configured()), func(t *testing.T) {
			nodes := append(shareFleet("sharing", 0, 1, 2), shareFleet("training", 1, 2, 8)...)
			ix := NewIndex(nodes, nil, Config{Pools: pools})
			for i := range 2 {
				r := shareReq(fmt.Sprint("s", i), 600)
				pl, why := ix.Place(&r, pools)
				if why != nil {
					t.Fatalf("share %d: %v", i, why)
				}
				if pl.Pool != "sharing" || len(pl.Parts) != 1 || pl.Parts[0].Node != "n000" {
					t.Fatalf("share %d placed %+v, want on n000 in the sharing pool", i, pl)
				}
				if p := pl.Parts[0]; p.GPUs.Count() != 1 || p.GPUMilli != 600 {
					t.Fatalf("share %d part %+v: want one GPU at 600 milli", i, p)
				}
			}
			r := shareReq("s2", 600)
			_, why := ix.Place(&r, pools)
			if why == nil {
				t.Fatalf("a third 600 share was placed: the sharing pool has 400 left per GPU; it went elsewhere")
			}
			if why.Code != ReasonUnschedulable || why.Constraint != "gpu_milli" || !strings.Contains(why.Message, "is 400") ||
				why.BestAt != "n000 GPU 0" {
				t.Fatalf("reason %+v: want unschedulable on gpu_milli, naming 400 free at n000 GPU 0", why)
			}
			if s := ix.Summary(true); s.FreeGPUs != 16 || s.SharedGPUs != 2 || s.SharedFreeMilli != 800 || s.LargestShare != 400 {
				t.Fatalf("summary %+v: the training pool must be untouched", s)
			}
		})
	}
}

func TestPlaceSharedReasons(t *testing.T) {
	draining := shareFleet("sharing", 0, 1, 8)
	draining[0].Draining = true
	tests := []struct {
		name       string
		nodes      []model.Node
		pools      Pools
		constraint string
		mention    string
	}{
		{"no sharing pool", shareFleet("training", 0, 2, 8), Pools{}, "pool", "--pool sharing"},
		{"sharing pool drained", append(draining, shareFleet("training", 1, 1, 8)...), Pools{}, "pool", "--pool sharing"},
		{"renamed pool missing", shareFleet("sharing", 0, 1, 8), Pools{Sharing: "notebooks"}, "pool", "--pool notebooks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex(tt.nodes, nil, Config{Pools: tt.pools})
			before := stateOf(ix)
			r := shareReq("s", 250)
			_, why := ix.Place(&r, tt.pools)
			if why == nil {
				t.Fatalf("placed with no schedulable node in the sharing pool")
			}
			if why.Code != ReasonUnschedulable || why.Constraint != tt.constraint || !strings.Contains(why.Message, tt.mention) {
				t.Fatalf("reason %+v: want unschedulable on %s mentioning %q", why, tt.constraint, tt.mention)
			}
			if diff := cmp.Diff(before, stateOf(ix)); diff != "" {
				t.Fatalf("a failed placement changed the index:\n%s", diff)
			}
		})
	}
}

func TestPlaceSharedRenamedPool(t *testing.T) {
	nodes := append(shareFleet("sharing", 0, 1, 8), shareFleet("notebooks", 1, 1, 8)...)
	for _, tt := range []struct {
		pools      Pools
		pool, node string
	}{{Pools{}, "sharing", "n000"}, {Pools{Sharing: "notebooks"}, "notebooks", "n001"}} {
		ix := NewIndex(nodes, nil, Config{Pools: tt.pools})
		for i := range 10 {
			r := shareReq(fmt.Sprint("s", i), 500)
			pl, why := ix.Place(&r, tt.pools)
			if why != nil || pl.Pool != tt.pool || pl.Parts[0].Node != tt.node {
				t.Fatalf("pools %+v share %d: %+v (%v), want on %s in %s", tt.pools, i, pl, why, tt.node, tt.pool)
			}
		}
	}
}

func TestPlaceSharedConstraints(t *testing.T) {
	mixed := append(shareFleet("sharing", 0, 1, 1), schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 1, GPUs: 1,
		Pool: "sharing", Model: "A100", FirstNode: 1})...)
	small := shareFleet("sharing", 0, 1, 8)
	small[0].CPUMilli, small[0].MemoryMiB = 1000, 4096
	withCPU := func(r model.Request, cpu, mem int64) model.Request {
		r.CPUMilli, r.MemoryMiB = cpu, mem
		return r
	}
	a100 := shareReq("s", 600)
	a100.Models = []string{"A100"}
	tests := []struct {
		name  string
		nodes []model.Node
		req   model.Request
		fit   int    // how many of req place before one fails
		node  string // where they go
		most  string // what the reason says is the most free
	}{
		// n000 is an H100 with a free GPU, never used: the 400 left on
		// the A100 is the most an A100 share can have.
		{"models", mixed, a100, 1, "n001", "is 400 (n001 GPU 0)"},
		{"cpu", small, withCPU(shareReq("s", 100), 600, 0), 1, "n000", "is 0"},
		{"memory", small, withCPU(shareReq("s", 100), 0, 3000), 1, "n000", "is 0"},
		{"cpu exactly", small, withCPU(shareReq("s", 100), 500, 2048), 2, "n000", "is 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex(tt.nodes, nil, Config{})
			for i := 0; ; i++ {
				r := tt.req
				pl, why := ix.Place(&r, Pools{})
				if why != nil {
					if i != tt.fit {
						t.Fatalf("%d placed, want %d (reason: %v)", i, tt.fit, why)
					}
					if why.Constraint != "gpu_milli" || !strings.Contains(why.Message, tt.most) {
						t.Fatalf("reason %+v: want gpu_milli saying %q", why, tt.most)
					}
					break
				}
				if i == tt.fit {
					t.Fatalf("placed %d, want %d: %+v", i+1, tt.fit, pl)
				}
				p := pl.Parts[0]
				if p.Node != tt.node || p.CPUMilli != r.CPUMilli || p.MemoryMiB != r.MemoryMiB {
					t.Fatalf("share %d part %+v: want on %s carrying the cpu and memory asked", i, p, tt.node)
				}
			}
			for i := range ix.nodes {
				if ns := &ix.nodes[i]; ns.cpu < 0 || ns.mem < 0 {
					t.Fatalf("%s over-committed: cpu %d mem %d left", ns.node.ID, ns.cpu, ns.mem)
				}
			}
		})
	}
}

// --- 5. Packing ----------------------------------------------------------

// With no mix set, the placer measures against the request itself: shares
// stack on one GPU as long as what is left there still takes another, and
// move to a fresh GPU rather than strand a remainder no such share can use.
func TestSharePacking(t *testing.T) {
	tests := []struct {
		name  string
		milli int
		mix   ShareMix
		want  []int // GPU of each successive share on one 8-GPU node
	}{
		{"quarters fill one GPU", 250, nil, []int{0, 0, 0, 0, 1}},
		{"halves fill one GPU", 500, nil, []int{0, 0, 1, 1, 2}},
		{"300s: a third would strand 100", 300, nil, []int{0, 0, 1, 1, 2}},
		{"600s never pair", 600, nil, []int{0, 1, 2}},
		{"400s spread while only 400s are wanted", 400, nil, []int{0, 1, 2}},
		{"400s stack when whole GPUs are wanted too", 400,
			ShareMix{{GPUs: 1, GPUMilli: 400, P: 0.5}, {GPUs: 1, GPUMilli: 1000, P: 0.5}}, []int{0, 0, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex(shareFleet("sharing", 0, 1, 8), nil, Config{})
			ix.SetMix(tt.mix)
			var got []int
			for i := range tt.want {
				r := shareReq(fmt.Sprint("s", i), tt.milli)
				pl, why := ix.Place(&r, Pools{})
				if why != nil {
					t.Fatalf("share %d: %v", i, why)
				}
				got = append(got, gpuOf(pl.Parts[0].GPUs))
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("shares went to GPUs %v, want %v", got, tt.want)
			}
		})
	}
}

// Across nodes, a share goes where it leaves the least stranded.
func TestSharePlacerPrefersTheNodeItFits(t *testing.T) {
	nodes := shareFleet("sharing", 0, 2, 2)
	// n000: GPU 0 has 300 free, GPU 1 400. n001: GPU 0 has 600 free.
	allocs := []model.Allocation{shareAlloc("a", "n000", 0, 700), shareAlloc("b", "n000", 1, 600), shareAlloc("c", "n001", 0, 400)}
	ix := NewIndex(nodes, allocs, Config{})
	r := shareReq("s", 300)
	pl, why := ix.Place(&r, Pools{})
	if why != nil {
		t.Fatal(why)
	}
	if p := pl.Parts[0]; p.Node != "n000" || gpuOf(p.GPUs) != 0 {
		t.Fatalf("a 300 share went to %s GPU %d; n000 GPU 0 has exactly 300 free", p.Node, gpuOf(p.GPUs))
	}
}

// TestShareProperties drives a small sharing fleet through random shares,
// whole-GPU requests, direct assigns, releases and rolled-back tentative
// placements, and checks after every step that no GPU is over-committed,
// none is both whole and shared, and the index agrees with a naive count
// over the live allocations and with an index built afresh from them.
func TestShareProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var nodes []model.Node
		for i := range rapid.IntRange(1, 3).Draw(t, "nodes") {
			gpus := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus")
			n := model.Node{ID: fmt.Sprintf("n%d", i), Pod: "p", Pool: "sharing", Model: "H100", GPUs: gpus,
				CPUMilli: int64(gpus) * 4000, MemoryMiB: int64(gpus) * 8192, Health: model.HealthHealthy}
			switch rapid.IntRange(0, 6).Draw(t, "state") {
			case 0:
				n.Draining = true
			case 1:
				n.QuarantinedGPUs = model.MaskOf(rapid.IntRange(0, gpus-1).Draw(t, "bad"))
			}
			nodes = append(nodes, n)
		}
		byID := map[string]*model.Node{}
		for i := range nodes {
			byID[nodes[i].ID] = &nodes[i]
		}
		cfg := Config{}
		ix := NewIndex(nodes, nil, cfg)
		if rapid.Bool().Draw(t, "mix") {
			ix.SetMix(ShareMix{{GPUs: 1, GPUMilli: 300, P: 0.6}, {GPUs: 1, GPUMilli: 1000, P: 0.4}})
		}
		var ledger []model.Allocation
		genShare := func(id string) model.Request {
			r := shareReq(id, rapid.SampledFrom([]int{1, 100, 250, 300, 333, 500, 700, 999}).Draw(t, "milli"))
			r.CPUMilli = rapid.SampledFrom([]int64{0, 1000, 3000}).Draw(t, "cpu")
			r.MemoryMiB = rapid.SampledFrom([]int64{0, 4096}).Draw(t, "mem")
			return r
		}
		place := func(id string) (model.Request, Placement, *Reason) {
			var r model.Request
			if rapid.Bool().Draw(t, "share") {
				r = genShare(id)
			} else {
				r = wholeReq(id, rapid.IntRange(1, 8).Draw(t, "wholeGPUs"))
			}
			pl, why := ix.Place(&r, cfg.Pools)
			return r, pl, why
		}
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for s := range steps {
			id := fmt.Sprintf("r%d", s)
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op <= 4:
				view := naiveView(nodes, ledger)
				r, pl, why := place(id)
				if why != nil {
					checkNothingFits(t, nodes, ledger, view, &r)
					continue
				}
				ledger = append(ledger, checkSharePlacement(t, byID, view, ledger, &r, pl)...)
			case op == 5:
				n := rapid.SampledFrom(nodes).Draw(t, "node")
				g := rapid.IntRange(0, n.GPUs-1).Draw(t, "gpu")
				a := shareAlloc(id, n.ID, g, rapid.IntRange(1, 999).Draw(t, "assignMilli"))
				want := naiveView(nodes, ledger)[n.ID][g] >= a.GPUMilli
				if got := ix.Assign(a); got != want {
					t.Fatalf("Assign(%d milli on %s GPU %d) = %v, naive free %d", a.GPUMilli, n.ID, g, got, naiveView(nodes, ledger)[n.ID][g])
				}
				if want {
					ledger = append(ledger, a)
				}
			case op <= 7:
				if len(ledger) == 0 {
					continue
				}
				owner := rapid.SampledFrom(ledger).Draw(t, "release").OwnerID
				for _, a := range ledger {
					if a.OwnerID == owner {
						ix.Release(a)
					}
				}
				ledger = dropOwner(ledger, owner)
			default:
				before := stateOf(ix)
				cp := ix.Checkpoint()
				if len(ledger) > 0 && rapid.Bool().Draw(t, "tentativeRelease") {
					ix.Release(rapid.SampledFrom(ledger).Draw(t, "tentativeVictim"))
				}
				for k := range rapid.IntRange(1, 4).Draw(t, "tentative") {
					place(fmt.Sprintf("%s-%d", id, k))
				}
				ix.Rollback(cp)
				if diff := cmp.Diff(before, stateOf(ix)); diff != "" {
					t.Fatalf("step %d: rollback of tentative placements left (-before +after):\n%s", s, diff)
				}
			}
			checkShareInvariants(t, s, nodes, ledger, ix, cfg)
		}
	})
}

// naiveView is each GPU's free milli from the live allocations alone.
func naiveView(nodes []model.Node, ledger []model.Allocation) map[string][]int {
	out := map[string][]int{}
	whole := map[string]model.GPUMask{}
	shared := map[string][]int{}
	for _, n := range nodes {
		shared[n.ID] = make([]int, n.GPUs)
	}
	for _, a := range ledger {
		if a.GPUMilli > 0 {
			shared[a.NodeID][gpuOf(a.GPUs)] += a.GPUMilli
		} else {
			whole[a.NodeID] |= a.GPUs
		}
	}
	for _, n := range nodes {
		free := make([]int, n.GPUs)
		for g := range free {
			switch {
			case n.QuarantinedGPUs.Has(g) || whole[n.ID].Has(g):
				free[g] = 0
			default:
				free[g] = 1000 - shared[n.ID][g]
			}
		}
		out[n.ID] = free
	}
	return out
}

func usedCPU(ledger []model.Allocation, node string) (cpu, mem int64) {
	for _, a := range ledger {
		if a.NodeID == node {
			cpu += a.CPUMilli
			mem += a.MemoryMiB
		}
	}
	return cpu, mem
}

// checkNothingFits: when the placer finds nothing, neither does a naive
// search over schedulable nodes.
func checkNothingFits(t *rapid.T, nodes []model.Node, ledger []model.Allocation, view map[string][]int, r *model.Request) {
	for _, n := range nodes {
		cpu, mem := usedCPU(ledger, n.ID)
		if !n.Schedulable() || n.CPUMilli-cpu < r.CPUMilli || n.MemoryMiB-mem < r.MemoryMiB {
			continue
		}
		whole := 0
		for g, f := range view[n.ID] {
			if r.Fraction() && f >= r.GPUMilli {
				t.Fatalf("%d-milli share refused; %s GPU %d has %d free", r.GPUMilli, n.ID, g, f)
			}
			if f == 1000 {
				whole++
			}
		}
		if !r.Fraction() && whole >= r.GPUs {
			t.Fatalf("%d-GPU request refused; %s has %d whole GPUs free", r.GPUs, n.ID, whole)
		}
	}
}

// checkSharePlacement checks one placement against the state before it and
// returns its allocations.
func checkSharePlacement(t *rapid.T, byID map[string]*model.Node, view map[string][]int, ledger []model.Allocation,
	r *model.Request, pl Placement) []model.Allocation {
	if len(pl.Parts) != 1 {
		t.Fatalf("%+v: placed in %d parts", r.Shape, len(pl.Parts))
	}
	p := pl.Parts[0]
	n := byID[p.Node]
	cpu, mem := usedCPU(ledger, n.ID)
	switch {
	case !n.Schedulable():
		t.Fatalf("placed on unschedulable %s", n.ID)
	case p.GPUs&^model.FullMask(n.GPUs) != 0 || p.GPUs&n.QuarantinedGPUs != 0:
		t.Fatalf("mask %s on %s (%d GPUs, quarantined %s)", p.GPUs, n.ID, n.GPUs, n.QuarantinedGPUs)
	case cpu+p.CPUMilli > n.CPUMilli || mem+p.MemoryMiB > n.MemoryMiB:
		t.Fatalf("%s over cpu or memory", n.ID)
	case p.CPUMilli != r.CPUMilli || p.MemoryMiB != r.MemoryMiB:
		t.Fatalf("part %+v does not carry the request's cpu and memory", p)
	}
	if r.Fraction() {
		g := gpuOf(p.GPUs)
		if p.GPUs.Count() != 1 || p.GPUMilli != r.GPUMilli {
			t.Fatalf("share of %d placed as %+v", r.GPUMilli, p)
		}
		if view[n.ID][g] < r.GPUMilli {
			t.Fatalf("%d-milli share on %s GPU %d, which had %d free", r.GPUMilli, n.ID, g, view[n.ID][g])
		}
	} else {
		if p.GPUs.Count() != r.GPUs || p.GPUMilli != 0 {
			t.Fatalf("%d whole GPUs placed as %+v", r.GPUs, p)
		}
		for _, g := range p.GPUs.Indices() {
			if view[n.ID][g] != 1000 {
				t.Fatalf("whole GPU %d of %s taken with %d milli free (shared or held)", g, n.ID, view[n.ID][g])
			}
		}
	}
	return []model.Allocation{{ID: r.OwnerID, NodeID: p.Node, GPUs: p.GPUs, GPUMilli: p.GPUMilli, CPUMilli: p.CPUMilli,
		MemoryMiB: p.MemoryMiB, OwnerKind: r.Kind, OwnerID: r.OwnerID}}
}

func checkShareInvariants(t *rapid.T, step int, nodes []model.Node, ledger []model.Allocation, ix *Index, cfg Config) {
	whole := map[string]model.GPUMask{}
	shared := map[string]map[int]int{}
	for _, a := range ledger {
		if a.GPUMilli > 0 {
			if shared[a.NodeID] == nil {
				shared[a.NodeID] = map[int]int{}
			}
			shared[a.NodeID][gpuOf(a.GPUs)] += a.GPUMilli
			continue
		}
		if whole[a.NodeID]&a.GPUs != 0 {
			t.Fatalf("step %d: GPUs %s of %s in two whole allocations", step, whole[a.NodeID]&a.GPUs, a.NodeID)
		}
		whole[a.NodeID] |= a.GPUs
	}
	for node, gs := range shared {
		for g, m := range gs {
			if m > 1000 {
				t.Fatalf("step %d: %s GPU %d holds %d milli of shares", step, node, g, m)
			}
			if whole[node].Has(g) {
				t.Fatalf("step %d: %s GPU %d is both held whole and shared", step, node, g)
			}
		}
	}
	view := naiveView(nodes, ledger)
	for _, n := range nodes {
		i := ix.byID[n.ID]
		for g := range n.GPUs {
			if got := ix.freeMilli(i, model.MaskOf(g)); got != view[n.ID][g] {
				t.Fatalf("step %d: freeMilli(%s, GPU %d) = %d, naive %d", step, n.ID, g, got, view[n.ID][g])
			}
		}
		cpu, mem := usedCPU(ledger, n.ID)
		if ns := &ix.nodes[i]; ns.cpu != n.CPUMilli-cpu || ns.mem != n.MemoryMiB-mem {
			t.Fatalf("step %d: %s free cpu/mem %d/%d, naive %d/%d", step, n.ID, ns.cpu, ns.mem, n.CPUMilli-cpu, n.MemoryMiB-mem)
		}
	}
	if diff := cmp.Diff(stateOf(NewIndex(nodes, ledger, cfg)), stateOf(ix)); diff != "" {
		t.Fatalf("step %d: incremental index drifted from a fresh build (-fresh +incremental):\n%s", step, diff)
	}
}

// --- 6. Plan -------------------------------------------------------------

var shareNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fracJob is a pending job; later seq means submitted later.
func fracJob(id string, milli, gpus, prio, seq int) model.Job {
	return model.Job{ID: id, Shape: model.Shape{GPUs: gpus, GPUMilli: milli, Topology: model.TopologyNode}, Priority: prio,
		State: model.JobPending, SubmittedAt: shareNow.Add(time.Duration(seq-100) * time.Minute)}
}

func TestPlanBindsShares(t *testing.T) {
	for _, gpus := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d GPUs", gpus), func(t *testing.T) {
			s := State{Nodes: shareFleet("sharing", 0, 1, gpus),
				Jobs: JobsOf([]model.Job{fracJob("a", 400, 1, 0, 1), fracJob("b", 700, 1, 0, 2)})}
			d := Plan(s, shareNow)
			used := map[int]int{}
			for _, b := range d.Binds {
				if len(b.Parts) != 1 || b.Pool != "sharing" || b.Kind != model.OwnerTraining {
					t.Fatalf("bind %+v: want one part in the sharing pool", b)
				}
				want := map[string]int{"a": 400, "b": 700}[b.OwnerID]
				if p := b.Parts[0]; p.GPUMilli != want || p.GPUs.Count() != 1 {
					t.Fatalf("bind %s part %+v: want one GPU at %d milli", b.OwnerID, p, want)
				}
				used[gpuOf(b.Parts[0].GPUs)] += b.Parts[0].GPUMilli
			}
			for g, m := range used {
				if m > 1000 {
					t.Fatalf("GPU %d given %d milli", g, m)
				}
			}
			if len(d.Binds)+len(d.Pending) != 2 || len(d.Binds) != gpus {
				t.Fatalf("%d binds, %d pending; want %d binds: 400 and 700 never share a GPU", len(d.Binds), len(d.Pending), gpus)
			}
			if gpus == 1 {
				if p := d.Pending[0]; p.OwnerID != "b" || p.Reason.Constraint != "gpu_milli" {
					t.Fatalf("pending %+v: want b waiting on gpu_milli", p)
				}
			}
			if d.Topology.SharedGPUs != gpus {
				t.Fatalf("decision topology %+v: want %d shared GPUs", d.Topology, gpus)
			}
		})
	}
}

// runningFleet is four training nodes full of preemptible priority-0 jobs
// that have run two hours: victims any whole-GPU job of higher priority
// could take.
func runningFleet() ([]model.Node, []model.Job, []model.Allocation) {
	nodes := shareFleet("training", 10, 4, 8)
	var jobs []model.Job
	var allocs []model.Allocation
	for i, n := range nodes {
		id := fmt.Sprintf("v%d", i)
		started := shareNow.Add(-2 * time.Hour)
		jobs = append(jobs, model.Job{ID: id, Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Preemptible: true,
			Checkpoint: &model.Checkpoint{Path: "/ckpt", SizeBytes: 1 << 30}, State: model.JobRunning,
			SubmittedAt: started, StartedAt: started})
		allocs = append(allocs, model.Allocation{ID: id + "/" + n.ID, NodeID: n.ID, GPUs: model.FullMask(8),
			OwnerKind: model.OwnerTraining, OwnerID: id, Preemptible: true, CreatedAt: started})
	}
	return nodes, jobs, allocs
}

func TestPlanShareNeverPreempts(t *testing.T) {
	tests := []struct {
		name    string
		third   model.Job
		preempt bool
	}{
		{"a share that does not fit waits", fracJob("c", 900, 1, 100, 3), false},
		// The control: the same fleet, a whole-GPU job in its place.
		{"a whole-GPU job preempts", fracJob("c", 0, 8, 100, 3), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, jobs, allocs := runningFleet()
			s := State{Nodes: append(shareFleet("sharing", 0, 1, 2), nodes...), Allocations: allocs,
				Jobs: JobsOf(append(jobs, fracJob("a", 400, 1, 100, 1), fracJob("b", 700, 1, 100, 2), tt.third))}
			// Rank by priority alone: under the SLO tiers an 8-GPU job
			// waits for churn rather than preempting.
			s.Config.SLO.MaxGPUs = -1
			d := Plan(s, shareNow)
			if got := len(d.Preemptions) > 0; got != tt.preempt {
				t.Fatalf("preemptions %+v, want any: %v", d.Preemptions, tt.preempt)
			}
			bound := map[string]bool{}
			for _, b := range d.Binds {
				bound[b.OwnerID] = true
			}
			if !bound["a"] || !bound["b"] || bound["c"] {
				t.Fatalf("binds %+v: want a and b placed, c not", d.Binds)
			}
			if tt.preempt {
				return
			}
			if len(d.Pending) != 1 || d.Pending[0].OwnerID != "c" || d.Pending[0].Reason.Constraint != "gpu_milli" ||
				d.Pending[0].Reason.Message == "" {
				t.Fatalf("pending %+v: want c waiting on gpu_milli", d.Pending)
			}
			if len(d.Reservations) != 0 {
				t.Fatalf("a share held GPUs: %+v", d.Reservations)
			}
		})
	}
}

func TestPlanShareReplicas(t *testing.T) {
	nodes, jobs, allocs := runningFleet()
	dep := func(id string, milli, gpus, min, desired int) model.Deployment {
		return model.Deployment{ID: id, ReplicaShape: model.Shape{GPUs: gpus, GPUMilli: milli, Topology: model.TopologyNode},
			MinReplicas: min, MaxReplicas: 4, Desired: desired}
	}
	tests := []struct {
		name    string
		dep     model.Deployment
		binds   int
		preempt bool
	}{
		{"three quarter-GPU replicas", dep("nb", 250, 1, 1, 3), 3, false},
		{"replicas that do not fit wait below min", dep("nb", 900, 1, 4, 4), 2, false},
		{"control: whole-GPU replicas below min preempt", dep("nb", 0, 8, 1, 1), 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{Nodes: append(shareFleet("sharing", 0, 1, 2), nodes...), Allocations: allocs, Jobs: JobsOf(jobs),
				Deployments: []model.Deployment{tt.dep}}
			d := Plan(s, shareNow)
			if got := len(d.Preemptions) > 0; got != tt.preempt {
				t.Fatalf("preemptions %+v, want any: %v", d.Preemptions, tt.preempt)
			}
			if len(d.Binds) != tt.binds {
				t.Fatalf("%d binds, want %d: %+v", len(d.Binds), tt.binds, d.Binds)
			}
			used := map[model.GPUMask]int{}
			replicas := map[int]bool{}
			for _, b := range d.Binds {
				p := b.Parts[0]
				if b.Kind != model.OwnerInference || len(b.Parts) != 1 || p.GPUMilli != tt.dep.ReplicaShape.GPUMilli || p.Node != "n000" {
					t.Fatalf("bind %+v: want one share of %d milli on n000", b, tt.dep.ReplicaShape.GPUMilli)
				}
				used[p.GPUs] += p.GPUMilli
				replicas[b.Replica] = true
			}
			for m, u := range used {
				if u > 1000 {
					t.Fatalf("GPU %s given %d milli", m, u)
				}
			}
			if len(replicas) != tt.binds {
				t.Fatalf("replica numbers %v repeat", replicas)
			}
			if !tt.preempt && tt.binds < tt.dep.Target() {
				if len(d.Pending) != 1 || d.Pending[0].Missing != tt.dep.Target()-tt.binds || d.Pending[0].Reason.Constraint != "gpu_milli" {
					t.Fatalf("pending %+v: want %d missing on gpu_milli", d.Pending, tt.dep.Target()-tt.binds)
				}
			}
		})
	}
}

func TestShareMixOfState(t *testing.T) {
	whole := fracJob("w", 0, 1, 0, 1)
	big := fracJob("g", 0, 8, 0, 2)
	done := fracJob("f", 300, 1, 0, 3)
	done.State = model.JobCompleted
	frac := fracJob("s", 300, 1, 0, 4)
	wholeDep := model.Deployment{ID: "d", ReplicaShape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, MaxReplicas: 3, Desired: 3}
	fracDep := model.Deployment{ID: "e", ReplicaShape: model.Shape{GPUs: 1, GPUMilli: 250, Topology: model.TopologyNode}, MaxReplicas: 2, Desired: 2}

	for _, s := range []State{
		{},
		{Jobs: JobsOf([]model.Job{whole, big}), Deployments: []model.Deployment{wholeDep}},
		{Jobs: JobsOf([]model.Job{whole, done})},
	} {
		if m := shareMix(&s); m != nil {
			t.Errorf("jobs %d deployments %d with no live share: mix %+v, want nil", len(s.Jobs), len(s.Deployments), m)
		}
	}
	tests := []struct {
		name string
		s    State
		want ShareMix
	}{
		{"a share and a one-GPU job", State{Jobs: JobsOf([]model.Job{whole, big, frac, done})},
			ShareMix{{GPUs: 1, GPUMilli: 300, P: 0.5}, {GPUs: 1, GPUMilli: 1000, P: 0.5}}},
		{"replicas count by target", State{Jobs: JobsOf([]model.Job{whole}), Deployments: []model.Deployment{fracDep, wholeDep}},
			ShareMix{{GPUs: 1, GPUMilli: 1000, P: 4.0 / 6}, {GPUs: 1, GPUMilli: 250, P: 2.0 / 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shareMix(&tt.s)
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })); diff != "" {
				t.Fatalf("mix (-want +got):\n%s", diff)
			}
		})
	}
}

// --- 7. The share placer's parts -----------------------------------------

func TestMixOf(t *testing.T) {
	var reqs []ShareRequest
	add := func(n int, r ShareRequest) {
		for i := range n {
			r.MemoryMiB = int64(100 + 200*(i%2)) // mean 200 when n is even
			reqs = append(reqs, r)
		}
	}
	add(30, ShareRequest{GPUs: 1, GPUMilli: 500})
	add(50, ShareRequest{CPUMilli: 1000, GPUs: 1, GPUMilli: 250})
	add(4, ShareRequest{GPUs: 2, GPUMilli: 1000})
	add(15, ShareRequest{GPUs: 1, GPUMilli: 1000, Models: []string{"A100"}})
	add(1, ShareRequest{GPUs: 1, GPUMilli: 100})
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
	typical := ShareMix{
		{CPUMilli: 1000, MemoryMiB: 200, GPUs: 1, GPUMilli: 250, P: 50.0 / 95},
		{MemoryMiB: 200, GPUs: 1, GPUMilli: 500, P: 30.0 / 95},
		{MemoryMiB: 193, GPUs: 1, GPUMilli: 1000, Models: []string{"A100"}, P: 15.0 / 95}, // (8×100 + 7×300) / 15
	}
	if diff := cmp.Diff(typical, TypicalMix(reqs), approx); diff != "" {
		t.Fatalf("typical mix (-want +got):\n%s", diff)
	}
	// The 2-GPU type is 4% of requests, outside the 95%: MixOf keeps it at
	// its share of all requests. The 100-milli share stays out.
	want := append(slices.Clone(typical), ShareType{MemoryMiB: 200, GPUs: 2, GPUMilli: 1000, P: 4.0 / 100})
	if diff := cmp.Diff(want, MixOf(reqs), approx); diff != "" {
		t.Fatalf("mix (-want +got):\n%s", diff)
	}
	if MixOf(nil) != nil || TypicalMix(nil) != nil {
		t.Fatalf("MixOf(nil) = %+v, TypicalMix(nil) = %+v, want nil", MixOf(nil), TypicalMix(nil))
	}
}

func TestMixOfProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 200).Draw(t, "n")
		reqs := make([]ShareRequest, n)
		for i := range reqs {
			reqs[i] = ShareRequest{CPUMilli: rapid.SampledFrom([]int64{0, 1000}).Draw(t, "cpu"),
				MemoryMiB: int64(rapid.IntRange(0, 4).Draw(t, "mem")), GPUs: rapid.IntRange(0, 2).Draw(t, "gpus"),
				GPUMilli: rapid.SampledFrom([]int{0, 100, 500, 1000}).Draw(t, "milli")}
			if rapid.IntRange(0, 5).Draw(t, "models") == 0 {
				reqs[i].Models = []string{"A100"}
			}
		}
		mix := TypicalMix(reqs)
		// MixOf is the typical mix and then every other multi-GPU type.
		full := MixOf(reqs)
		if !slices.EqualFunc(full[:len(mix)], mix, func(a, b ShareType) bool { return cmp.Equal(a, b) }) {
			t.Fatalf("MixOf does not start with the typical mix: %+v, typical %+v", full, mix)
		}
		for _, m := range full[len(mix):] {
			if m.GPUs < 2 {
				t.Fatalf("MixOf adds %+v beyond the typical mix: only multi-GPU types belong there", m)
			}
			c := 0
			for _, r := range reqs {
				if r.CPUMilli == m.CPUMilli && r.GPUs == m.GPUs && r.GPUMilli == m.GPUMilli && slices.Equal(r.Models, m.Models) {
					c++
				}
			}
			if math.Abs(m.P-float64(c)/float64(n)) > 1e-9 {
				t.Fatalf("added type %+v: P %v, want %d/%d", m, m.P, c, n)
			}
		}
		counts := make([]int, len(mix))
		covered, sum := 0, 0.0
		for i, m := range mix {
			for _, r := range reqs {
				if r.CPUMilli == m.CPUMilli && r.GPUs == m.GPUs && r.GPUMilli == m.GPUMilli && slices.Equal(r.Models, m.Models) {
					counts[i]++
				}
			}
			if counts[i] == 0 {
				t.Fatalf("type %+v matches no request", m)
			}
			if i > 0 && counts[i] > counts[i-1] {
				t.Fatalf("type %d (%d requests) after one with %d: most frequent first", i, counts[i], counts[i-1])
			}
			covered += counts[i]
			sum += m.P
		}
		if float64(covered) < 0.95*float64(n) {
			t.Fatalf("mix covers %d of %d requests", covered, n)
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("frequencies sum to %v", sum)
		}
		for i, m := range mix {
			if math.Abs(m.P-float64(counts[i])/float64(covered)) > 1e-9 {
				t.Fatalf("type %+v: P %v, want %d/%d", m, m.P, counts[i], covered)
			}
		}
		// Dropping the last type would cover less than 95%: no more types
		// than needed.
		if len(mix) > 0 && float64(covered-counts[len(mix)-1]) >= 0.95*float64(n) {
			t.Fatalf("mix has a type too many: %d of %d covered without the last", covered-counts[len(mix)-1], n)
		}
	})
}

func TestFragmentation(t *testing.T) {
	half := ShareMix{{GPUs: 1, GPUMilli: 500, P: 1}}
	node := func(free ...int) ShareNode {
		return ShareNode{Model: "H100", CPUFree: 64000, MemFree: 1 << 20, Free: free}
	}
	all := func(n, f int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = f
		}
		return out
	}
	tests := []struct {
		name string
		mix  ShareMix
		n    ShareNode
		want float64
	}{
		{"empty node", half, node(all(8, 1000)...), 0},
		{"every GPU at 300", half, node(all(8, 300)...), 2400},
		{"some GPUs too small", half, node(1000, 300, 0, 500), 300},
		{"no cpu left strands everything", ShareMix{{CPUMilli: 1000, GPUs: 1, GPUMilli: 500, P: 1}},
			ShareNode{Model: "H100", CPUFree: 999, MemFree: 1 << 20, Free: []int{1000, 300}}, 1300},
		{"no memory left strands everything", ShareMix{{MemoryMiB: 10, GPUs: 1, GPUMilli: 500, P: 1}},
			ShareNode{Model: "H100", CPUFree: 1000, MemFree: 9, Free: []int{1000, 300}}, 1300},
		{"wrong model strands everything", ShareMix{{GPUs: 1, GPUMilli: 500, Models: []string{"A100"}, P: 1}},
			node(1000, 300), 1300},
		{"two whole GPUs fit", ShareMix{{GPUs: 2, GPUMilli: 1000, P: 1}}, node(1000, 1000, 500), 500},
		{"two whole GPUs do not", ShareMix{{GPUs: 2, GPUMilli: 1000, P: 1}}, node(1000, 500, 500), 2000},
		{"weighted", ShareMix{{GPUs: 1, GPUMilli: 500, P: 0.5}, {GPUs: 1, GPUMilli: 1000, P: 0.5}}, node(600, 300), 600},
		{"empty mix", nil, node(300), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.mix.Fragmentation(tt.n); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("Fragmentation = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStranded(t *testing.T) {
	node := func(cpu, mem int64, free ...int) ShareNode {
		return ShareNode{Model: "H100", CPUFree: cpu, MemFree: mem, Free: free}
	}
	eight := []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}
	tests := []struct {
		name string
		mix  ShareMix
		n    ShareNode
		want float64
	}{
		{"GPU-bound: nothing stranded", ShareMix{{CPUMilli: 8000, GPUs: 1, GPUMilli: 1000, P: 1}}, node(96000, 1<<20, eight...), 0},
		// 96 cores hold six 16-core requests: two GPUs stranded.
		{"CPU-bound", ShareMix{{CPUMilli: 16000, GPUs: 1, GPUMilli: 1000, P: 1}}, node(96000, 1<<20, eight...), 2000},
		// CPU counts continuously: 100 cores hold 6.25 requests.
		{"CPU counts in fractions", ShareMix{{CPUMilli: 16000, GPUs: 1, GPUMilli: 1000, P: 1}}, node(100000, 1<<20, eight...), 1750},
		// Memory counts whole requests: 250 MiB hold two.
		{"memory counts whole requests", ShareMix{{MemoryMiB: 100, GPUs: 1, GPUMilli: 1000, P: 1}}, node(0, 250, eight...), 6000},
		// 700 free holds two 300 shares; 100 of each such GPU is left over.
		{"share remainders", ShareMix{{GPUs: 1, GPUMilli: 300, P: 1}}, node(0, 0, 700, 700, 200), 400},
		{"whole GPUs only count whole", ShareMix{{GPUs: 2, GPUMilli: 1000, P: 1}}, node(0, 0, 1000, 1000, 1000, 500), 1500},
		{"wrong model strands everything", ShareMix{{GPUs: 1, GPUMilli: 300, Models: []string{"A100"}, P: 1}}, node(0, 0, 1000, 700), 1700},
		{"CPU-only types strand nothing themselves", ShareMix{{CPUMilli: 1000, P: 1}}, node(0, 0, 1000), 0},
		{"no CPU left", ShareMix{{CPUMilli: 1000, GPUs: 1, GPUMilli: 300, P: 1}}, node(500, 1<<20, 1000), 1000 - 0.5*300},
		{"weighted", ShareMix{{CPUMilli: 16000, GPUs: 1, GPUMilli: 1000, P: 0.5}, {GPUs: 1, GPUMilli: 300, P: 0.5}},
			node(96000, 1<<20, eight...), 0.5*2000 + 0.5*(8*100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.mix.Stranded(tt.n); math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("Stranded = %v, want %v", got, tt.want)
			}
			want := tt.mix.Fragmentation(tt.n) + strandWeight*tt.want
			if got := NewSharePlacer(tt.mix).Cost(tt.n); math.Abs(got-want) > 1e-9 {
				t.Fatalf("Cost = %v, want Fragmentation + %v × Stranded = %v", got, strandWeight, want)
			}
		})
	}
}

// The stranding term is what moves CPU-heavy work to CPU-rich nodes: the
// same 1-GPU, 32-core request scores higher on a node with cores to spare
// than on one whose cores are already short of its GPUs.
func TestShareScoreSteersByCPU(t *testing.T) {
	mix := ShareMix{{CPUMilli: 12000, GPUs: 1, GPUMilli: 1000, P: 1}}
	poor := ShareNode{Model: "H100", CPUFree: 96000, MemFree: 1 << 20, Free: []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}}
	rich := ShareNode{Model: "H100", CPUFree: 104000, MemFree: 1 << 20, Free: []int{1000, 1000}}
	heavy := ShareRequest{CPUMilli: 32000, GPUs: 1, GPUMilli: 1000}
	light := ShareRequest{CPUMilli: 4000, GPUs: 1, GPUMilli: 1000}
	pl := NewSharePlacer(mix)
	hp, _ := pl.Score(poor, heavy)
	hr, _ := pl.Score(rich, heavy)
	if hp >= hr {
		t.Fatalf("a 32-core request scores %v on 8 GPUs/96 cores and %v on 2 GPUs/104 cores: want the CPU-rich node", hp, hr)
	}
	lp, _ := pl.Score(poor, light)
	if lp <= hp {
		t.Fatalf("on the CPU-poor node a 4-core request scores %v and a 32-core one %v: want the lighter one higher", lp, hp)
	}
}

func TestShareFits(t *testing.T) {
	n := ShareNode{Model: "H100", CPUFree: 1000, MemFree: 100, Free: []int{1000, 600, 0}}
	tests := []struct {
		name string
		r    ShareRequest
		want bool
	}{
		{"share within the most free", ShareRequest{GPUs: 1, GPUMilli: 999}, true},
		{"share on the shared GPU", ShareRequest{GPUs: 1, GPUMilli: 600}, true},
		{"one whole GPU", ShareRequest{GPUs: 1, GPUMilli: 1000}, true},
		{"two whole GPUs", ShareRequest{GPUs: 2, GPUMilli: 1000}, false},
		{"cpu", ShareRequest{CPUMilli: 1001, GPUs: 1, GPUMilli: 100}, false},
		{"memory", ShareRequest{MemoryMiB: 101, GPUs: 1, GPUMilli: 100}, false},
		{"model", ShareRequest{GPUs: 1, GPUMilli: 100, Models: []string{"A100"}}, false},
		{"model accepted", ShareRequest{GPUs: 1, GPUMilli: 100, Models: []string{"A100", "H100"}}, true},
		{"no GPU", ShareRequest{CPUMilli: 1000, Models: []string{"A100"}}, true},
	}
	for _, tt := range tests {
		if got := ShareFits(&n, &tt.r); got != tt.want {
			t.Errorf("%s: ShareFits = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := ShareFits(&ShareNode{Free: []int{999, 500}}, &ShareRequest{GPUs: 1, GPUMilli: 1000}); got {
		t.Errorf("a whole GPU fits a node with none whole")
	}
}

func TestShareScore(t *testing.T) {
	mix600 := ShareMix{{GPUs: 1, GPUMilli: 600, P: 1}}
	tests := []struct {
		name string
		free []int
		r    ShareRequest
		mix  ShareMix
		gpu  int
	}{
		// On the 600 GPU nothing is left over; on the free one 400 would
		// be left that no 600 share can use.
		{"the 600 GPU, second", []int{1000, 600}, ShareRequest{GPUs: 1, GPUMilli: 600}, mix600, 1},
		{"the 600 GPU, first", []int{600, 1000}, ShareRequest{GPUs: 1, GPUMilli: 600}, mix600, 0},
		// 100 stranded beats 400 stranded.
		{"the GPU that strands less", []int{700, 1000}, ShareRequest{GPUs: 1, GPUMilli: 600}, mix600, 0},
		{"ties go to the tighter GPU", []int{1000, 500, 1000}, ShareRequest{GPUs: 1, GPUMilli: 250},
			ShareMix{{GPUs: 1, GPUMilli: 250, P: 1}}, 1},
		{"whole GPUs have no GPU", []int{1000, 600, 1000}, ShareRequest{GPUs: 1, GPUMilli: 1000}, mix600, -1},
		{"an empty mix still picks", []int{1000, 600}, ShareRequest{GPUs: 1, GPUMilli: 600}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ShareNode{Model: "H100", CPUFree: 8000, MemFree: 8000, Free: tt.free}
			orig := slices.Clone(tt.free)
			pl := NewSharePlacer(tt.mix)
			sc, g := pl.Score(n, tt.r)
			if g != tt.gpu {
				t.Fatalf("Score chose GPU %d, want %d", g, tt.gpu)
			}
			if !slices.Equal(n.Free, orig) {
				t.Fatalf("Score changed the node's free list: %v, was %v", n.Free, orig)
			}
			sc2, g2 := pl.ScoreFrom(n, tt.r, pl.Cost(n))
			if sc2 != sc || g2 != g {
				t.Fatalf("ScoreFrom = %v, %d; Score = %v, %d", sc2, g2, sc, g)
			}
			if g < 0 {
				return
			}
			// Every other GPU that fits scores no higher.
			for other, f := range tt.free {
				if other == g || f < tt.r.GPUMilli {
					continue
				}
				alt := ShareNode{Model: n.Model, CPUFree: n.CPUFree, MemFree: n.MemFree, Free: slices.Clone(tt.free)}
				chosen := slices.Clone(tt.free)
				alt.Free[other] -= tt.r.GPUMilli
				chosen[g] -= tt.r.GPUMilli
				fa := pl.Cost(alt)
				fc := pl.Cost(ShareNode{Model: n.Model, CPUFree: n.CPUFree, MemFree: n.MemFree, Free: chosen})
				if fa < fc {
					t.Fatalf("GPU %d leaves fragmentation %v, chosen GPU %d leaves %v", other, fa, g, fc)
				}
			}
		})
	}
	// Across nodes: the same share scores higher where it leaves nothing
	// stranded.
	tight := ShareNode{Model: "H100", CPUFree: 8000, MemFree: 8000, Free: []int{600, 0}}
	loose := ShareNode{Model: "H100", CPUFree: 8000, MemFree: 8000, Free: []int{1000, 0}}
	r := ShareRequest{GPUs: 1, GPUMilli: 600}
	pl := NewSharePlacer(mix600)
	st, _ := pl.Score(tight, r)
	sl, _ := pl.Score(loose, r)
	if st <= sl {
		t.Fatalf("a 600 share scores %v on a GPU with 600 free, %v on a free one: want higher on the first", st, sl)
	}
}

func TestWholeGPUs(t *testing.T) {
	tests := []struct {
		free []int
		k    int
		want []int
	}{
		{[]int{1000, 600, 1000, 1000}, 2, []int{0, 2}},
		{[]int{1000, 600, 1000, 1000}, 5, []int{0, 2, 3}},
		{[]int{999, 0}, 1, nil},
		{[]int{1000}, 0, nil},
	}
	for _, tt := range tests {
		if got := WholeGPUs(tt.free, tt.k); !slices.Equal(got, tt.want) {
			t.Errorf("WholeGPUs(%v, %d) = %v, want %v", tt.free, tt.k, got, tt.want)
		}
	}
}

// --- Bugs found while writing these tests --------------------------------

// The training pass caches a failed placement by shapeKey while the index
// is unchanged; the key leaves out gpu_milli, so a share that does not fit
// makes every later job of the same gpus/cpu/memory pend unseen, whole or
// share, and a whole-GPU failure does the same to shares.
func TestPlanNoFitCacheKnowsGPUMilli(t *testing.T) {
	held := model.Allocation{ID: "r/n000", NodeID: "n000", GPUs: model.MaskOf(0), GPUMilli: 500,
		OwnerKind: model.OwnerTraining, OwnerID: "r"}
	running := model.Job{ID: "r", Shape: model.Shape{GPUs: 1, GPUMilli: 500, Topology: model.TopologyNode}, State: model.JobRunning}
	tests := []struct {
		name         string
		nodes        []model.Node
		first, later model.Job // first ranks higher and cannot be placed
	}{
		{"a smaller share after a share that does not fit", shareFleet("sharing", 0, 1, 1),
			fracJob("big", 900, 1, 10, 1), fracJob("small", 300, 1, 0, 2)},
		{"a whole GPU after a share that does not fit", append(shareFleet("sharing", 0, 1, 1), shareFleet("training", 1, 1, 8)...),
			fracJob("big", 900, 1, 10, 1), fracJob("whole", 0, 1, 0, 2)},
		{"a share after a whole GPU that does not fit", shareFleet("sharing", 0, 1, 1),
			fracJob("whole", 0, 1, 10, 1), fracJob("small", 300, 1, 0, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{Nodes: tt.nodes, Allocations: []model.Allocation{held}, Jobs: JobsOf([]model.Job{running, tt.first, tt.later})}
			d := Plan(s, shareNow)
			if len(d.Binds) != 1 || d.Binds[0].OwnerID != tt.later.ID {
				t.Fatalf("binds %+v, pending %+v: want %s placed (%s does not fit, %s does)",
					d.Binds, d.Pending, tt.later.ID, tt.first.ID, tt.later.ID)
			}
		})
	}
}

// Decision.Topology is the index's summary as decided; with the sharing
// pool renamed its largest share must still be measured there.
func TestPlanTopologyUsesTheSharingPool(t *testing.T) {
	s := State{Nodes: shareFleet("notebooks", 0, 1, 8), Config: Config{Pools: Pools{Sharing: "notebooks"}},
		Jobs: JobsOf([]model.Job{fracJob("a", 300, 1, 0, 1)})}
	d := Plan(s, shareNow)
	if len(d.Binds) != 1 || d.Binds[0].Pool != "notebooks" {
		t.Fatalf("binds %+v: want the share in notebooks", d.Binds)
	}
	if d.Topology.LargestShare != 999 || d.Topology.SharedFreeMilli != 700 {
		t.Fatalf("decision topology: largest share %d, shared free %d; want 999 and 700 (notebooks is the sharing pool)",
			d.Topology.LargestShare, d.Topology.SharedFreeMilli)
	}
}

// A whole-GPU job routed to the sharing pool (here the pool for small
// work) is placed by the share placer, as the packing benchmark places
// whole-GPU tasks: the 8-core job goes to the node with cores to spare
// rather than the one it would leave with a GPU and no core.
func TestWholeJobsInTheSharingPoolUseTheSharePlacer(t *testing.T) {
	nodes := shareFleet("sharing", 0, 2, 2)
	nodes[0].CPUMilli, nodes[1].CPUMilli = 8000, 64000
	pools := Pools{Small: "sharing", SmallMaxGPUs: 4}
	for _, mix := range []ShareMix{nil, {{CPUMilli: 8000, GPUs: 1, GPUMilli: 1000, P: 1}}} {
		ix := NewIndex(nodes, nil, Config{Pools: pools})
		ix.SetMix(mix)
		r := wholeReq("w", 1)
		r.CPUMilli = 8000
		pl, why := ix.Place(&r, pools)
		if why != nil {
			t.Fatal(why)
		}
		if pl.Pool != "sharing" || pl.Parts[0].Node != nodes[1].ID {
			t.Fatalf("mix %v: an 8-core GPU job went to %s in %q; want %s, where a second one still fits", mix, pl.Parts[0].Node, pl.Pool, nodes[1].ID)
		}
	}
}
