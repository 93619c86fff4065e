package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/model"
)

func TestChooseMask(t *testing.T) {
	node8 := &model.Node{GPUs: 8}
	tests := []struct {
		name string
		node *model.Node
		free string
		k    int
		want string
	}{
		{"4 of an empty node takes an aligned half", node8, "0-7", 4, "0-3"},
		{"2 of an empty node takes an aligned quarter", node8, "0-7", 2, "0-1"},
		{"4 goes to the free half, not spread", node8, "0-1,4-7", 4, "4-7"},
		{"2 fills the tighter half", node8, "2-7", 2, "2-3"},
		{"1 takes the lone free GPU of a pair", node8, "1,4-7", 1, "1"},
		{"3 keeps the free pair aligned", node8, "0-7", 3, "0-2"},
		{"6 takes a half and a quarter", node8, "0-7", 6, "0-5"},
		{"no aligned block: consume the fragments", node8, "0,2,4-5", 3, "0,2,4"},
		{"exact", node8, "1,3,5", 3, "1,3,5"},
		{"16-GPU node", &model.Node{GPUs: 16}, "0-15", 8, "0-7"},
		{"non power of two node", &model.Node{GPUs: 6}, "0-5", 2, "4-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			free, _ := model.ParseGPUMask(tt.free)
			if got := chooseMask(tt.node, free, tt.k); got.String() != tt.want {
				t.Fatalf("chooseMask(%s, %d) = %s, want %s", tt.free, tt.k, got, tt.want)
			}
		})
	}
}

func TestChooseMaskLinks(t *testing.T) {
	// Two NVLink islands {0,1,4,5} and {2,3,6,7}: the buddy halves cut
	// across them, so a 4-GPU request must follow the links instead.
	links := make([][]int, 8)
	for i := range links {
		links[i] = make([]int, 8)
	}
	island := func(gs ...int) {
		for _, a := range gs {
			for _, b := range gs {
				if a != b {
					links[a][b] = 2
				}
			}
		}
	}
	island(0, 1, 4, 5)
	island(2, 3, 6, 7)
	n := &model.Node{GPUs: 8, Links: &model.LinkMatrix{Links: links}}
	if got := chooseMask(n, model.FullMask(8), 4); got.String() != "0-1,4-5" {
		t.Fatalf("got %s, want the island 0-1,4-5", got)
	}
	// Free {0,2,5,7}: the buddy choice {0,2} has no link; {0,5} does.
	if got := chooseMask(n, model.MaskOf(0, 2, 5, 7), 2); got.String() != "0,5" {
		t.Fatalf("got %s, want the linked pair 0,5", got)
	}
	// With equal links, the buddy choice stands: the tighter half's pair.
	if got := chooseMask(n, model.MaskOf(0, 2, 3, 6, 7), 2); got.String() != "6-7" {
		t.Fatalf("got %s, want 6-7", got)
	}
}

func TestPlaceable(t *testing.T) {
	tests := []struct{ free, empties, size, want int }{
		{0, 0, 8, 0},
		{16, 2, 8, 16}, // two whole nodes
		{16, 1, 8, 15}, // 16 needs two whole nodes; one is partial
		{14, 1, 8, 14},
		{3, 0, 1, 3},
		{24, 0, 8, 23},
	}
	for _, tt := range tests {
		if got := placeable(tt.free, tt.empties, tt.size); got != tt.want {
			t.Errorf("placeable(free=%d, empties=%d, size=%d) = %d, want %d", tt.free, tt.empties, tt.size, got, tt.want)
		}
	}
}

func TestBitset(t *testing.T) {
	b := newBitset(5000)
	for _, i := range []int{3, 64, 4095, 4096, 4999} {
		b.set(i)
	}
	var got []int
	for i := b.next(0); i >= 0; i = b.next(i + 1) {
		got = append(got, i)
	}
	want := []int{3, 64, 4095, 4096, 4999}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, i := range want {
		b.clear(i)
	}
	if b.next(0) != -1 {
		t.Fatalf("cleared bitset not empty")
	}
}

func TestRoutes(t *testing.T) {
	p := DefaultPools()
	tests := []struct {
		name string
		req  model.Request
		want []route
	}{
		{"notebook to small, then the training pool's holes", model.Request{Shape: model.Shape{GPUs: 1}, Kind: model.OwnerTraining}, []route{{pool: "small"}, {pool: "training"}}},
		{"4-GPU replica to inference", model.Request{Shape: model.Shape{GPUs: 4}, Kind: model.OwnerInference}, []route{{pool: "inference"}}},
		{"2-GPU replica to small", model.Request{Shape: model.Shape{GPUs: 2}, Kind: model.OwnerInference}, []route{{pool: "small"}}},
		{"gang to training", model.Request{Shape: model.Shape{GPUs: 64}, Kind: model.OwnerTraining}, []route{{pool: "training"}}},
		{"preemptible gang may borrow", model.Request{Shape: model.Shape{GPUs: 32}, Kind: model.OwnerTraining, Preemptible: true},
			[]route{{pool: "training"}, {pool: "inference", borrowed: true}}},
		{"with no cap set, a large preemptible gang may borrow too", model.Request{Shape: model.Shape{GPUs: 256}, Kind: model.OwnerTraining, Preemptible: true},
			[]route{{pool: "training"}, {pool: "inference", borrowed: true}}},
		{"a gang that cannot be preempted never borrows", model.Request{Shape: model.Shape{GPUs: 8}, Kind: model.OwnerTraining},
			[]route{{pool: "training"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.routes(&tt.req)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
			}
		})
	}
	capped := DefaultPools()
	capped.BorrowMaxGPUs = 32
	if got := capped.routes(&model.Request{Shape: model.Shape{GPUs: 64}, Kind: model.OwnerTraining, Preemptible: true}); len(got) != 1 || got[0].pool != "training" {
		t.Fatalf("a 64-GPU gang with borrow_max_gpus 32 routes to %+v, want the training pool only", got)
	}
	if got := capped.routes(&model.Request{Shape: model.Shape{GPUs: 32}, Kind: model.OwnerTraining, Preemptible: true}); len(got) != 2 || !got[1].borrowed {
		t.Fatalf("a 32-GPU gang with borrow_max_gpus 32 routes to %+v, want the training pool, then borrowing", got)
	}
	if got := (&Pools{}).routes(&model.Request{Shape: model.Shape{GPUs: 1}}); len(got) != 2 || !got[0].any || got[0].skip != "sharing" || got[1].pool != "sharing" {
		t.Fatalf("unconfigured pools route to %+v, want every pool but the sharing pool, then the sharing pool", got)
	}
}

func TestRollbackRestoresIndex(t *testing.T) {
	nodes := []model.Node{{ID: "a", Pod: "p", Model: "H100", GPUs: 8}, {ID: "b", Pod: "p", Model: "H100", GPUs: 8}}
	ix := NewIndex(nodes, nil, Config{})
	before := ix.Summary(true)
	cp := ix.Checkpoint()
	req := model.Request{Shape: model.Shape{GPUs: 12, Topology: model.TopologyPod}}
	if _, why := ix.Place(&req, Pools{}); why != nil {
		t.Fatal(why)
	}
	ix.Rollback(cp)
	after := ix.Summary(true)
	if after.FreeGPUs != before.FreeGPUs || after.FreeNodesFull != before.FreeNodesFull || after.LargestPlaceable != before.LargestPlaceable {
		t.Fatalf("rollback left %+v, want %+v", after, before)
	}
}

func TestSizePools(t *testing.T) {
	var nodes []model.Node
	for i := 0; i < 20; i++ {
		nodes = append(nodes, model.Node{ID: string(rune('a' + i)), Pod: "p", GPUs: 8})
	}
	deps := []model.Deployment{{ID: "chat", ReplicaShape: model.Shape{GPUs: 4, Topology: model.TopologyNode}, MaxReplicas: 5}}
	got, sz := SizePools(nodes, deps, DefaultPools(), 2)
	if sz.InferenceGPUs != 20 || sz.InferenceNodes != 3 || sz.SmallNodes != 2 || sz.SwapNodes != 1 || sz.TrainingNodes != 14 {
		t.Fatalf("sizes %+v", sz)
	}
	if got["t"] != "inference" || got["q"] != "small" || got["o"] != "swap" || got["a"] != "training" {
		t.Fatalf("assignment %v", got)
	}
}

func TestAdmitDeployment(t *testing.T) {
	s := State{Nodes: []model.Node{{ID: "a", Pod: "p", Model: "H100", GPUs: 8}, {ID: "b", Pod: "p", Model: "H100", GPUs: 8}}}
	ok := model.Deployment{ID: "chat", ReplicaShape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, MinReplicas: 1, MaxReplicas: 2}
	if err := AdmitDeployment(s, ok); err != nil {
		t.Fatalf("valid deployment refused: %v", err)
	}
	tests := []struct {
		mutate func(*model.Deployment)
		field  string
	}{
		{func(d *model.Deployment) { d.ReplicaShape.GPUs = 16 }, "replica_shape.gpus"},
		{func(d *model.Deployment) { d.ReplicaShape.GPUs = 4; d.ReplicaShape.Models = []string{"B200"} }, "replica_shape"},
		{func(d *model.Deployment) { d.MaxReplicas = 3 }, "max_replicas"},
		{func(d *model.Deployment) { d.ReplicaShape.GPUs, d.MaxReplicas = 1, 17 }, "max_replicas"},
		{func(d *model.Deployment) {
			d.ReplicaShape.GPUs, d.ReplicaShape.GPUMilli, d.MaxReplicas = 1, 100, 161
		}, "max_replicas"},
		{func(d *model.Deployment) { d.MaxReplicas = 0 }, "max_replicas"},
		{func(d *model.Deployment) { d.ReplicaShape.Topology = "rack" }, "replica_shape.topology"},
		{func(d *model.Deployment) { d.ID = "" }, "id"},
	}
	for _, tt := range tests {
		d := ok
		tt.mutate(&d)
		err := AdmitDeployment(s, d)
		ae, isAdmission := err.(*AdmissionError)
		if !isAdmission || ae.Field != tt.field {
			t.Errorf("got %v, want an admission error on %s", err, tt.field)
		}
	}
}

// TestShareNeverOverflows: a node's share of a request's CPU or memory is
// computed in 128 bits: values near the int64 limit saturate instead of
// wrapping to a negative share that fits everywhere.
func TestShareNeverOverflows(t *testing.T) {
	for _, tc := range []struct {
		total int64
		n, k  int
		want  int64
	}{
		{0, 1, 2, 0},
		{16000, 4, 8, 8000},
		{10, 1, 3, 4}, // rounded up: the parts cover the whole
		{math.MaxInt64, 1, 1, math.MaxInt64},
		{6917529027641081856, 1, 2, 3458764513820540928},
		{6917529027641081856, 2, 2, 6917529027641081856},
		{math.MaxInt64, 8, 2, math.MaxInt64}, // saturates
		{-5, 1, 2, 0},
	} {
		if got := share(tc.total, tc.n, tc.k); got != tc.want || got < 0 {
			t.Errorf("share(%d, %d, %d) = %d, want %d", tc.total, tc.n, tc.k, got, tc.want)
		}
	}
}

// TestWholeGPUWorkLeavesTheSharingPool: on a fleet without shape pools, a
// whole-GPU job never takes a sharing-pool node while the fleet has other
// nodes for it, even full ones: those nodes are where shares fit. On a
// fleet that shares every node (openb's), whole-GPU work runs there.
func TestWholeGPUWorkLeavesTheSharingPool(t *testing.T) {
	nodes := []model.Node{{ID: "a", Pod: "p", Model: "H100", GPUs: 8, Pool: "sharing"}, {ID: "b", Pod: "p", Model: "H100", GPUs: 8}}
	ix := NewIndex(nodes, nil, Config{})
	req := model.Request{Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, Kind: model.OwnerTraining, OwnerID: "j"}
	for i := 0; i < 9; i++ {
		pl, why := ix.Place(&req, Pools{})
		if i == 8 {
			if why == nil {
				t.Fatalf("job 9 placed on %s: the sharing node is for shares", pl.Parts[0].Node)
			}
			break
		}
		if why != nil || pl.Parts[0].Node != "b" {
			t.Fatalf("job %d: %+v %v, want node b", i, pl.Parts, why)
		}
		ix.Assign(model.Allocation{NodeID: pl.Parts[0].Node, GPUs: pl.Parts[0].GPUs})
	}
	shared := NewIndex(nodes[:1], nil, Config{})
	if pl, why := shared.Place(&req, Pools{}); why != nil || pl.Parts[0].Node != "a" {
		t.Fatalf("a fleet of sharing nodes only: %+v %v", pl.Parts, why)
	}
}

// A worker size keeps each process's GPUs on one node: with 3, 3 and 2
// GPUs free, 6 GPUs of 2-GPU workers take 2+2+2 (3+3 would leave a
// worker straddling two nodes), 3-GPU workers take 3+3, and 4-GPU workers
// find no room. Whole free nodes still go whole when the worker divides
// them, and are pieces when it does not.
func TestWorkerSizeKeepsProcessesWhole(t *testing.T) {
	nodes := []model.Node{{ID: "a", Pod: "p", GPUs: 8}, {ID: "b", Pod: "p", GPUs: 8}, {ID: "c", Pod: "p", GPUs: 8}, {ID: "d", Pod: "p", GPUs: 8}}
	busy := func(node string, n int) model.Allocation {
		return model.Allocation{ID: node + "-busy", NodeID: node, GPUs: model.FullMask(n), OwnerKind: model.OwnerTraining, OwnerID: "x"}
	}
	allocs := []model.Allocation{busy("a", 5), busy("b", 5), busy("c", 6), busy("d", 8)}
	parts := func(worker, gpus int) (string, *Reason) {
		ix := NewIndex(nodes, allocs, Config{})
		req := model.Request{Shape: model.Shape{GPUs: gpus, Topology: model.TopologyAny, Worker: worker}}
		pl, why := ix.Place(&req, Pools{})
		var out []string
		for _, pt := range pl.Parts {
			out = append(out, fmt.Sprintf("%s:%d", pt.Node, pt.GPUs.Count()))
		}
		slices.Sort(out)
		return strings.Join(out, " "), why
	}
	for _, tc := range []struct {
		worker, gpus int
		want         string
	}{{0, 6, "a:3 b:3"}, {2, 6, "a:2 b:2 c:2"}, {3, 6, "a:3 b:3"}, {4, 4, ""}} {
		got, why := parts(tc.worker, tc.gpus)
		if got != tc.want || (tc.want == "") != (why != nil) {
			t.Errorf("%d GPUs in workers of %d: parts %q (%v), want %q", tc.gpus, tc.worker, got, why, tc.want)
		}
	}
	empty := []model.Node{{ID: "a", Pod: "p", GPUs: 8}, {ID: "b", Pod: "p", GPUs: 8}}
	for _, tc := range []struct {
		worker, gpus int
		want         string
	}{{4, 16, "a:8 b:8"}, {3, 12, "a:6 b:6"}} {
		ix := NewIndex(empty, nil, Config{})
		req := model.Request{Shape: model.Shape{GPUs: tc.gpus, Topology: model.TopologyPod, Worker: tc.worker}}
		pl, why := ix.Place(&req, Pools{})
		var out []string
		for _, pt := range pl.Parts {
			out = append(out, fmt.Sprintf("%s:%d", pt.Node, pt.GPUs.Count()))
		}
		slices.Sort(out)
		if got := strings.Join(out, " "); got != tc.want {
			t.Errorf("%d GPUs in workers of %d on empty nodes: parts %q (%v), want %q", tc.gpus, tc.worker, got, why, tc.want)
		}
	}
}
