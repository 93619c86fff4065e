package sched

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched/schedtest"
)

var elasticNow = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// elasticJob is a pod-topology job that runs at 16 to 32 GPUs.
func elasticJob(id string, state model.JobState) model.Job {
	j := model.Job{ID: id, Shape: model.Shape{GPUs: 32, Topology: model.TopologyPod}, Preemptible: true,
		Checkpoint: &model.Checkpoint{Path: "/ckpt/" + id, SizeBytes: 1e9}, State: state,
		Elastic:     &model.Elastic{MinGPUs: 16, MaxGPUs: 32},
		SubmittedAt: elasticNow.Add(-3 * time.Hour)}
	if state == model.JobRunning {
		j.StartedAt = elasticNow.Add(-2 * time.Hour)
		j.EditRun().LastCheckpointAt = elasticNow.Add(-20 * time.Minute)
	}
	return j
}

// wholeNodes gives owner the whole nodes named, created at the times given.
func wholeNodes(owner string, at []time.Time, nodes ...int) []model.Allocation {
	var out []model.Allocation
	for k, n := range nodes {
		out = append(out, model.Allocation{ID: fmt.Sprintf("%s-%d", owner, k), NodeID: schedtest.NodeName(n), GPUs: model.FullMask(8),
			OwnerKind: model.OwnerTraining, OwnerID: owner, Preemptible: true, CreatedAt: at[k]})
	}
	return out
}

func times(ts ...time.Duration) []time.Time {
	out := make([]time.Time, len(ts))
	for i, d := range ts {
		out[i] = elasticNow.Add(-d)
	}
	return out
}

func bindGPUs(d Decision, owner string) (int, *Bind) {
	for i := range d.Binds {
		if d.Binds[i].OwnerID == owner {
			return d.Binds[i].GPUs(), &d.Binds[i]
		}
	}
	return 0, nil
}

func TestElasticStartsAtWhatFits(t *testing.T) {
	tests := []struct {
		name     string
		busy     []int // nodes of pod-a another job holds
		wantGPUs int
	}{
		{"an empty pod: straight to the maximum, in one bind", nil, 32},
		{"two nodes free: the minimum", []int{0, 1}, 16},
		{"three free: the largest allowed size that fits", []int{0}, 24},
		{"one free: below the minimum, it waits", []int{0, 1, 2}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{Nodes: schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 4, GPUs: 8}),
				Jobs: JobsOf([]model.Job{elasticJob("el", model.JobPending)})}
			if len(tt.busy) > 0 {
				other := model.Job{ID: "other", Shape: model.Shape{GPUs: 8 * len(tt.busy), Topology: model.TopologyPod}, State: model.JobRunning,
					SubmittedAt: elasticNow.Add(-5 * time.Hour), StartedAt: elasticNow.Add(-5 * time.Minute)}
				s.Jobs = append(s.Jobs, &other)
				ts := make([]time.Duration, len(tt.busy))
				s.Allocations = wholeNodes("other", times(ts...), tt.busy...)
			}
			d := Plan(s, elasticNow)
			got, b := bindGPUs(d, "el")
			if got != tt.wantGPUs {
				t.Fatalf("bound %d GPUs, want %d (binds %+v, pending %+v)", got, tt.wantGPUs, d.Binds, d.Pending)
			}
			if b != nil && b.Grow {
				t.Fatalf("a job starting is bound, not grown: %+v", b)
			}
			if got == 0 && len(d.Pending) != 1 {
				t.Fatalf("below its minimum the job should be pending with a reason: %+v", d.Pending)
			}
		})
	}
}

func TestElasticGrowsIntoIdleWholeNodesOfItsPod(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 2, NodesPerPod: 4, GPUs: 8})
	run := func(j model.Job, allocs []model.Allocation) Decision {
		return Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{j}), Allocations: allocs}, elasticNow)
	}
	j := elasticJob("el", model.JobRunning)
	j.Size = 16
	d := run(j, wholeNodes("el", times(2*time.Hour, 2*time.Hour), 0, 1))
	got, b := bindGPUs(d, "el")
	if got != 16 || b == nil || !b.Grow || b.ResizeFrom != 16 {
		t.Fatalf("a 16-GPU elastic job beside two idle nodes: bind %+v, want a 16-GPU grow from 16", b)
	}
	for _, pt := range b.Parts {
		if pt.Node != schedtest.NodeName(2) && pt.Node != schedtest.NodeName(3) {
			t.Fatalf("growth left the job's pod or took a partial node: %+v", b.Parts)
		}
	}

	// Resized (or started) within GrowAfter: no growth, no restart.
	j.ResizeRecord = &model.ResizeRecord{ResizedAt: elasticNow.Add(-time.Minute)}
	if d := run(j, wholeNodes("el", times(2*time.Hour, time.Minute), 0, 1)); len(d.Binds) != 0 {
		t.Fatalf("a job resized a minute ago grew again: %+v", d.Binds)
	}

	// Its own pod full, the other empty: a pod job does not grow across.
	j.ResizeRecord = nil
	full := wholeNodes("el", times(2*time.Hour, 2*time.Hour), 0, 1)
	other := model.Job{ID: "other", Shape: model.Shape{GPUs: 16, Topology: model.TopologyPod}, State: model.JobRunning, SubmittedAt: elasticNow.Add(-9 * time.Hour), StartedAt: elasticNow.Add(-time.Hour)}
	allocs := append(full, wholeNodes("other", times(time.Hour, time.Hour), 2, 3)...)
	d = Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{j, other}), Allocations: allocs}, elasticNow)
	if len(d.Binds) != 0 {
		t.Fatalf("a pod job grew outside its pod: %+v", d.Binds)
	}
}

// TestElasticShrinksBeforeAnyJobYields: inference that needs room takes an
// elastic job's growth (its newest nodes) before preempting a rigid job,
// even one that ranks lower; the job runs on at its minimum.
func TestElasticShrinksBeforeAnyJobYields(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 6, GPUs: 8})
	el := elasticJob("el", model.JobRunning)
	el.Priority, el.Size = 50, 32
	rigid := model.Job{ID: "rigid", Shape: model.Shape{GPUs: 16, Topology: model.TopologyPod}, Preemptible: true, Priority: 0,
		Checkpoint: &model.Checkpoint{Path: "/c", SizeBytes: 1e9}, State: model.JobRunning,
		SubmittedAt: elasticNow.Add(-5 * time.Hour), StartedAt: elasticNow.Add(-4 * time.Hour)}
	allocs := wholeNodes("el", times(2*time.Hour, 2*time.Hour, 30*time.Minute, 30*time.Minute), 0, 1, 2, 3)
	allocs = append(allocs, wholeNodes("rigid", times(4*time.Hour, 4*time.Hour), 4, 5)...)
	// Both replicas are the availability floor: each takes one node of
	// growth (a replica above the floor would meet the budget, 8 more
	// GPUs of 48 in the hour), and the two shrinks of one job in one pass
	// are one, to 16.
	dep := model.Deployment{ID: "chat", ReplicaShape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, MinReplicas: 2, MaxReplicas: 2, Desired: 2, Priority: 100}
	d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{el, rigid}), Allocations: allocs, Deployments: []model.Deployment{dep}}, elasticNow)
	if len(d.Preemptions) != 1 {
		t.Fatalf("want one shrink, got %+v", d.Preemptions)
	}
	p := d.Preemptions[0]
	if p.JobID != "el" || p.ResizeTo != 16 || p.GPUs != 16 || strings.Join(p.Allocations, ",") != "el-2,el-3" {
		t.Fatalf("want el shrunk to 16 by its two newest nodes, got %+v", p)
	}
	// Priced like a preemption: all 32 GPUs restart from the checkpoint
	// written 20 minutes ago.
	if p.LostGPUHours < 10 || p.LostGPUHours > 11 {
		t.Fatalf("lost %.1f GPU-h, want 32 GPUs × 20 min ≈ 10.7", p.LostGPUHours)
	}

	// At its minimum it is an ordinary victim again, ranked by §7.
	el.Size = 16
	d = Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{el, rigid}), Allocations: append(wholeNodes("el", times(2*time.Hour, 2*time.Hour), 0, 1), allocs[4:]...),
		Deployments: []model.Deployment{{ID: "chat", ReplicaShape: dep.ReplicaShape, MinReplicas: 1, MaxReplicas: 8, Desired: 6, Priority: 100}}}, elasticNow)
	for _, p := range d.Preemptions {
		if p.ResizeTo != 0 {
			t.Fatalf("a job at its minimum was shrunk: %+v", p)
		}
	}
}

// TestElasticGrowthYieldsToAnyWaitingJob: growth is idle capacity lent;
// a job submitted after the elastic one (ranked below it) takes it back.
func TestElasticGrowthYieldsToAnyWaitingJob(t *testing.T) {
	// A second pod of rigid work keeps the shrink within the budget
	// (16 of 64 running training GPUs an hour).
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 2, NodesPerPod: 4, GPUs: 8})
	el := elasticJob("el", model.JobRunning)
	el.Size = 32
	late := model.Job{ID: "late", Shape: model.Shape{GPUs: 16, Topology: model.TopologyPod}, State: model.JobPending, SubmittedAt: elasticNow.Add(-time.Minute)}
	bulk := model.Job{ID: "bulk", Shape: model.Shape{GPUs: 32, Topology: model.TopologyPod}, State: model.JobRunning, SubmittedAt: elasticNow.Add(-9 * time.Hour), StartedAt: elasticNow.Add(-8 * time.Hour)}
	allocs := wholeNodes("el", times(2*time.Hour, 2*time.Hour, time.Hour, time.Hour), 0, 1, 2, 3)
	allocs = append(allocs, wholeNodes("bulk", times(8*time.Hour, 8*time.Hour, 8*time.Hour, 8*time.Hour), 4, 5, 6, 7)...)
	d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{el, late, bulk}), Allocations: allocs}, elasticNow)
	if len(d.Preemptions) != 1 || d.Preemptions[0].ResizeTo != 16 || d.Preemptions[0].For != "late" {
		t.Fatalf("want el shrunk to 16 for late, got %+v", d.Preemptions)
	}
	if len(d.Reservations) != 1 || d.Reservations[0].Owner != "late" {
		t.Fatalf("late should reserve the growth it waits for: %+v", d.Reservations)
	}
}

func TestElasticValidation(t *testing.T) {
	base := func() model.Job {
		j := elasticJob("el", model.JobPending)
		return j
	}
	tests := []struct {
		name string
		edit func(*model.Job)
		want string
	}{
		{"valid", func(*model.Job) {}, ""},
		{"min not a whole node", func(j *model.Job) { j.Elastic.MinGPUs = 12 }, "elastic.min_gpus: 12: expected a positive multiple of 8"},
		{"max not above min", func(j *model.Job) { j.Elastic.MaxGPUs, j.Shape.GPUs = 16, 16 }, "elastic.max_gpus: 16 must be above min_gpus 16"},
		{"node topology, single GPUs", func(j *model.Job) {
			j.Shape.Topology, j.Shape.GPUs, j.Elastic.MinGPUs, j.Elastic.MaxGPUs = model.TopologyNode, 6, 3, 6
		}, ""},
		{"node topology, sizes", func(j *model.Job) {
			j.Shape.Topology, j.Shape.GPUs, j.Elastic.MinGPUs, j.Elastic.MaxGPUs, j.Elastic.Sizes = model.TopologyNode, 8, 2, 8, []int{2, 4, 8}
		}, ""},
		{"node topology, no GPUs", func(j *model.Job) {
			j.Shape.Topology, j.Shape.GPUs, j.Elastic.MinGPUs, j.Elastic.MaxGPUs = model.TopologyNode, 8, 0, 8
		}, "elastic.min_gpus: 0: expected 1 to 64 GPUs"},
		{"any topology, whole nodes", func(j *model.Job) { j.Shape.Topology, j.Elastic.MinGPUs = model.TopologyAny, 20 }, "elastic.min_gpus: 20: expected a positive multiple of 8"},
		{"gpus not max", func(j *model.Job) { j.Shape.GPUs = 24 }, "shape.gpus: 24 must equal elastic.max_gpus 32"},
		{"sizes outside", func(j *model.Job) { j.Elastic.Sizes = []int{16, 40} }, "elastic.sizes[1]: 40: expected between"},
		{"sizes not ascending", func(j *model.Job) { j.Elastic.Sizes = []int{16, 32, 24} }, "ascending"},
		{"sizes must span", func(j *model.Job) { j.Elastic.Sizes = []int{16, 24} }, "must start at min_gpus 16 and end at max_gpus 32"},
		{"no checkpoint", func(j *model.Job) { j.Checkpoint, j.Preemptible = nil, false }, "checkpoint: an elastic job must declare one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := base()
			tt.edit(&j)
			err := j.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
	e := model.Elastic{MinGPUs: 16, MaxGPUs: 64, Sizes: []int{16, 32, 64}}
	for n, want := range map[int]int{8: 0, 16: 16, 24: 16, 40: 32, 64: 64, 100: 64} {
		if got := e.AtMost(n, model.ElasticStep); got != want {
			t.Errorf("AtMost(%d) = %d, want %d", n, got, want)
		}
	}
}

// nodeElastic is a node-topology job that runs at 2 to 8 GPUs of one node.
func nodeElastic(id string, state model.JobState, sizes ...int) model.Job {
	j := elasticJob(id, state)
	j.Shape.Topology, j.Shape.GPUs = model.TopologyNode, 8
	j.Elastic = &model.Elastic{MinGPUs: 2, MaxGPUs: 8, Sizes: sizes}
	return j
}

// gpusOn gives owner GPUs first..first+n-1 of node, created at.
func gpusOn(owner, id string, node, first, n int, at time.Time) model.Allocation {
	return model.Allocation{ID: id, NodeID: schedtest.NodeName(node), GPUs: model.FullMask(first+n) &^ model.FullMask(first),
		OwnerKind: model.OwnerTraining, OwnerID: owner, Preemptible: true, CreatedAt: at}
}

// planNodeShrink plans node 0 holding allocs of j, node 1 full with a
// job "bulk" (preemptible or not: another victim or none), and a
// deployment "chat" whose replicas of replicaGPUs, all of them the
// availability floor, need room.
func planNodeShrink(j model.Job, bulkPreemptible bool, replicaGPUs, replicas int, allocs ...model.Allocation) Decision {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 2, GPUs: 8})
	bulk := model.Job{ID: "bulk", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, State: model.JobRunning, Preemptible: bulkPreemptible,
		Checkpoint: &model.Checkpoint{Path: "/c", SizeBytes: 1e9}, SubmittedAt: elasticNow.Add(-9 * time.Hour), StartedAt: elasticNow.Add(-8 * time.Hour)}
	b := gpusOn("bulk", "bulk-0", 1, 0, 8, elasticNow.Add(-8*time.Hour))
	b.Preemptible = bulkPreemptible
	dep := model.Deployment{ID: "chat", ReplicaShape: model.Shape{GPUs: replicaGPUs, Topology: model.TopologyNode},
		MinReplicas: replicas, MaxReplicas: replicas, Desired: replicas, Priority: 100}
	return Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{j, bulk}), Allocations: append(allocs, b), Deployments: []model.Deployment{dep}}, elasticNow)
}

// TestElasticNodeJobGrowsOnItsOwnNode: a node job lives in one NVLink
// domain, so it grows by GPUs of its own node, never onto another, to the
// largest allowed size that fits.
func TestElasticNodeJobGrowsOnItsOwnNode(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 2, GPUs: 8})
	other := model.Job{ID: "other", Shape: model.Shape{GPUs: 3, Topology: model.TopologyNode}, State: model.JobRunning,
		SubmittedAt: elasticNow.Add(-9 * time.Hour), StartedAt: elasticNow.Add(-8 * time.Hour)}
	tests := []struct {
		name      string
		sizes     []int
		otherGPUs int // GPUs of node 0 another job holds
		wantGrow  int
	}{
		{"six free beside it: to the maximum", nil, 0, 6},
		{"three free: every size allowed, 2+3", nil, 3, 3},
		{"three free, sizes 2, 4, 8: to 4", []int{2, 4, 8}, 3, 2},
		{"its node full: no growth, though node 1 is empty", nil, 6, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := nodeElastic("el", model.JobRunning, tt.sizes...)
			j.Size = 2
			allocs := []model.Allocation{gpusOn("el", "el-0", 0, 0, 2, elasticNow.Add(-2*time.Hour))}
			jobs := []model.Job{j}
			if tt.otherGPUs > 0 {
				o := other
				o.Shape.GPUs = tt.otherGPUs
				jobs = append(jobs, o)
				allocs = append(allocs, gpusOn("other", "other-0", 0, 2, tt.otherGPUs, elasticNow.Add(-8*time.Hour)))
			}
			d := Plan(State{Nodes: nodes, Jobs: JobsOf(jobs), Allocations: allocs}, elasticNow)
			got, b := bindGPUs(d, "el")
			if got != tt.wantGrow {
				t.Fatalf("grew by %d GPUs, want %d (binds %+v)", got, tt.wantGrow, d.Binds)
			}
			if b == nil {
				return
			}
			if !b.Grow || b.ResizeFrom != 2 {
				t.Fatalf("want a grow from 2: %+v", b)
			}
			for _, pt := range b.Parts {
				if pt.Node != schedtest.NodeName(0) {
					t.Fatalf("a node job grew onto another node: %+v", b.Parts)
				}
			}
		})
	}
}

// TestElasticNodeJobStartsOnOneNode: bound on an empty node, a node job
// starts at the largest size the node gives, its growth a part of its own
// on the same node (what a later shrink gives back).
func TestElasticNodeJobStartsOnOneNode(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 2, GPUs: 8})
	d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{nodeElastic("el", model.JobPending)})}, elasticNow)
	got, b := bindGPUs(d, "el")
	if got != 8 || b == nil || b.Grow {
		t.Fatalf("bound %d GPUs (%+v), want a bind of 8", got, b)
	}
	if len(b.Parts) != 2 || b.Parts[0].Node != b.Parts[1].Node || b.Parts[0].GPUs.Count() != 2 || b.Parts[0].GPUs&b.Parts[1].GPUs != 0 {
		t.Fatalf("want the minimum (2) and the growth (6) as two parts of one node, disjoint: %+v", b.Parts)
	}
}

// TestElasticNodeJobShrinksForInference: a replica that needs the node's
// GPUs takes the node job's growth, not the job.
func TestElasticNodeJobShrinksForInference(t *testing.T) {
	j := nodeElastic("el", model.JobRunning)
	j.Size = 8
	d := planNodeShrink(j, true, 4, 1, gpusOn("el", "el-0", 0, 0, 2, elasticNow.Add(-2*time.Hour)), gpusOn("el", "el-1", 0, 2, 6, elasticNow.Add(-time.Hour)))
	if len(d.Preemptions) != 1 {
		t.Fatalf("want one shrink, got %+v", d.Preemptions)
	}
	if p := d.Preemptions[0]; p.JobID != "el" || p.ResizeTo != 2 || strings.Join(p.Allocations, ",") != "el-1" {
		t.Fatalf("want el shrunk to 2 by its growth el-1, got %+v", p)
	}

	// Bound at once, the minimum and the growth have one creation time:
	// the minimum's part is kept whatever the ids say.
	at := elasticNow.Add(-time.Hour)
	d = planNodeShrink(j, true, 4, 1, gpusOn("el", "el-b", 0, 0, 2, at), gpusOn("el", "el-a", 0, 2, 6, at))
	if len(d.Preemptions) != 1 || d.Preemptions[0].ResizeTo != 2 || strings.Join(d.Preemptions[0].Allocations, ",") != "el-a" {
		t.Fatalf("want el shrunk to 2 by its 6-GPU part el-a, got %+v", d.Preemptions)
	}
}

// TestElasticNodeJobKeepsThePartThatMakesItsMinimum: bound at once as a
// 6-GPU minimum and a 2-GPU growth, a job with a minimum of 6 gives back
// the 2, not nothing: keeping the smaller part first would keep both.
func TestElasticNodeJobKeepsThePartThatMakesItsMinimum(t *testing.T) {
	j := nodeElastic("el", model.JobRunning)
	j.Elastic.MinGPUs, j.Size = 6, 8
	at := elasticNow.Add(-time.Hour)
	d := planNodeShrink(j, true, 2, 1, gpusOn("el", "el-a", 0, 0, 2, at), gpusOn("el", "el-b", 0, 2, 6, at))
	if len(d.Preemptions) != 1 {
		t.Fatalf("want one shrink, got %+v", d.Preemptions)
	}
	if p := d.Preemptions[0]; p.JobID != "el" || p.ResizeTo != 6 || strings.Join(p.Allocations, ",") != "el-a" {
		t.Fatalf("want el shrunk to 6 by its 2-GPU part el-a, got %+v", p)
	}
}

// TestElasticJobAsksForItsMinimumsShareOfCPU: a shape's CPU and memory
// are declared for its maximum, so the minimum asks for its share of
// them. Asking for all of them at the minimum left a node with 6 free
// GPUs and three quarters of its cores unable to start a job that needs
// 2 GPUs and a quarter.
func TestElasticJobAsksForItsMinimumsShareOfCPU(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 2, GPUs: 8})
	node := nodes[0]
	j := nodeElastic("el", model.JobPending)
	j.Shape.CPUMilli, j.Shape.MemoryMiB = node.CPUMilli, node.MemoryMiB
	if r := j.Request(); r.GPUs != 2 || r.CPUMilli != node.CPUMilli/4 || r.MemoryMiB != node.MemoryMiB/4 {
		t.Fatalf("the minimum asks for %d GPUs, %d milli-CPU, %d MiB; want 2, %d, %d", r.GPUs, r.CPUMilli, r.MemoryMiB, node.CPUMilli/4, node.MemoryMiB/4)
	}
	other := model.Job{ID: "other", Shape: model.Shape{GPUs: 2, Topology: model.TopologyNode}, State: model.JobRunning,
		SubmittedAt: elasticNow.Add(-9 * time.Hour), StartedAt: elasticNow.Add(-8 * time.Hour)}
	busy := gpusOn("other", "other-0", 0, 0, 2, elasticNow.Add(-8*time.Hour))
	busy.CPUMilli, busy.MemoryMiB = node.CPUMilli/4, node.MemoryMiB/4
	full := gpusOn("other", "other-1", 1, 0, 8, elasticNow.Add(-8*time.Hour))
	other.Shape.GPUs = 10
	d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{j, other}), Allocations: []model.Allocation{busy, full}}, elasticNow)
	// 2 GPUs and a quarter of the cores at the minimum, then 4 more GPUs
	// with half: the node's last quarter of cores is all that 6 would need
	// beyond that, and there is none.
	if got, b := bindGPUs(d, "el"); got != 6 || b == nil || b.Grow {
		t.Fatalf("bound %d GPUs (%+v), want 6 on node 0 (pending %+v)", got, b, d.Pending)
	}
}

// TestElasticJobShrunkInAPassDoesNotGrowInIt: a node job at 2+4 with two
// GPUs of its node free gives its 4-GPU worker to a 3-GPU replica; the
// GPU the replica leaves must not go back to the job in the same pass.
// Applied in order, the grow (6 to 7) and then the shrink (to 2) left a
// job holding 3 GPUs whose size said 2.
func TestElasticJobShrunkInAPassDoesNotGrowInIt(t *testing.T) {
	j := nodeElastic("el", model.JobRunning)
	j.Size = 6
	d := planNodeShrink(j, false, 3, 1, gpusOn("el", "el-0", 0, 0, 2, elasticNow.Add(-2*time.Hour)),
		gpusOn("el", "el-1", 0, 2, 4, elasticNow.Add(-2*time.Hour+time.Minute)))
	if len(d.Preemptions) != 1 || d.Preemptions[0].JobID != "el" || d.Preemptions[0].ResizeTo != 2 {
		t.Fatalf("want el shrunk to 2, got %+v", d.Preemptions)
	}
	if got, b := bindGPUs(d, "el"); b != nil {
		t.Fatalf("el grew by %d GPUs in the pass that shrank it: %+v", got, b)
	}
}

// TestElasticNodeJobGrowsOnlyOntoWholeGPUs: on a sharing-pool node the
// partitioned GPUs are the operator's MIG instances for shares; a node
// job's growth takes the whole GPUs beside it, as its start did, never
// those.
func TestElasticNodeJobGrowsOnlyOntoWholeGPUs(t *testing.T) {
	nodes := shareFleet("sharing", 0, 1, 8)
	nodes[0].MIG = make([][]int, 8)
	for g := 4; g < 8; g++ {
		nodes[0].MIG[g] = []int{428, 285, 142, 142}
	}
	check := func(t *testing.T, d Decision) {
		t.Helper()
		for _, b := range d.Binds {
			for _, pt := range b.Parts {
				if pt.GPUs&^model.FullMask(4) != 0 {
					t.Fatalf("%s took partitioned GPUs: %+v", b.OwnerID, b.Parts)
				}
			}
		}
	}
	t.Run("bound at once", func(t *testing.T) {
		d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{nodeElastic("el", model.JobPending)})}, elasticNow)
		if got, _ := bindGPUs(d, "el"); got != 4 {
			t.Fatalf("bound %d GPUs, want the node's 4 whole ones (%+v)", got, d.Binds)
		}
		check(t, d)
	})
	t.Run("running", func(t *testing.T) {
		j := nodeElastic("el", model.JobRunning)
		j.Size = 2
		allocs := []model.Allocation{gpusOn("el", "el-0", 0, 0, 2, elasticNow.Add(-2*time.Hour))}
		d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{j}), Allocations: allocs}, elasticNow)
		if got, _ := bindGPUs(d, "el"); got != 2 {
			t.Fatalf("grew by %d GPUs, want the 2 whole ones left (%+v)", got, d.Binds)
		}
		check(t, d)
	})
}

// TestElasticGrowthAddsUpToTheShape: the minimum's CPU and each growth's
// add up to the shape's, not to more: a job declaring all of a node's
// cores grows to its maximum there.
func TestElasticGrowthAddsUpToTheShape(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 1, GPUs: 8, CPUMilli: 100000})
	j := nodeElastic("el", model.JobPending)
	j.Shape.GPUs, j.Shape.CPUMilli = 6, 100000
	j.Elastic.MaxGPUs = 6
	d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{j})}, elasticNow)
	got, b := bindGPUs(d, "el")
	if got != 6 {
		t.Fatalf("bound %d GPUs, want its maximum of 6 (%+v)", got, b)
	}
	var cpu int64
	for _, pt := range b.Parts {
		cpu += pt.CPUMilli
	}
	if cpu != 100000 {
		t.Fatalf("its parts hold %d milli-CPU, want the shape's 100000", cpu)
	}
}

// TestElasticShrinkTakesOnlyTheWorkersNeeded: a node job grown 2+2+4
// gives a 2-GPU replica its 2-GPU worker and runs on at 6, where a shrink
// of all its growth stopped six GPUs for two. A second replica in the
// same pass takes the 4-GPU worker, and the two are one shrink, to 2
// (the 4-GPU worker alone would have served both: the search goes one
// replica at a time).
func TestElasticShrinkTakesOnlyTheWorkersNeeded(t *testing.T) {
	j := nodeElastic("el", model.JobRunning)
	j.Size = 8
	allocs := []model.Allocation{
		gpusOn("el", "el-0", 0, 0, 2, elasticNow.Add(-3*time.Hour)),
		gpusOn("el", "el-1", 0, 2, 2, elasticNow.Add(-2*time.Hour)),
		gpusOn("el", "el-2", 0, 4, 4, elasticNow.Add(-time.Hour)),
	}
	tests := []struct {
		name     string
		replicas int
		want     string
		resizeTo int
	}{
		{"one replica: the 2-GPU worker", 1, "el-1", 6},
		{"two replicas: both workers, one shrink", 2, "el-1,el-2", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := planNodeShrink(j, false, 2, tt.replicas, slices.Clone(allocs)...)
			if len(d.Preemptions) != 1 {
				t.Fatalf("want one shrink, got %+v", d.Preemptions)
			}
			p := d.Preemptions[0]
			ids := slices.Clone(p.Allocations)
			slices.Sort(ids)
			if p.JobID != "el" || p.ResizeTo != tt.resizeTo || strings.Join(ids, ",") != tt.want || p.GPUs != 8-tt.resizeTo {
				t.Fatalf("want el shrunk to %d by %s, got %+v", tt.resizeTo, tt.want, p)
			}
		})
	}
}

// TestElasticJobYieldingWholeStopsEachWorkerOnce: when a fit needs the
// job itself and part of its growth, the job yields whole, and each of
// its workers is stopped once, in one preemption.
func TestElasticJobYieldingWholeStopsEachWorkerOnce(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 4, GPUs: 8})
	el := elasticJob("el", model.JobRunning)
	el.Size = 32
	allocs := wholeNodes("el", times(2*time.Hour, 2*time.Hour, 30*time.Minute, 30*time.Minute), 0, 1, 2, 3)
	dep := model.Deployment{ID: "big", ReplicaShape: model.Shape{GPUs: 24, Topology: model.TopologyPod}, MinReplicas: 1, MaxReplicas: 1, Desired: 1, Priority: 100}
	d := Plan(State{Nodes: nodes, Jobs: JobsOf([]model.Job{el}), Allocations: allocs, Deployments: []model.Deployment{dep}}, elasticNow)
	if len(d.Preemptions) != 1 {
		t.Fatalf("want one preemption of el, got %+v", d.Preemptions)
	}
	p := d.Preemptions[0]
	ids := slices.Clone(p.Allocations)
	slices.Sort(ids)
	if p.JobID != "el" || p.ResizeTo != 0 || p.GPUs != 32 || strings.Join(ids, ",") != "el-0,el-1,el-2,el-3" {
		t.Fatalf("want el preempted whole, each worker once, got %+v", p)
	}
}

// TestElasticBorrowerGrowsOnlyWhileThePoolIsLent: an elastic job that
// borrowed the inference pool grows there only while the pool is lent
// (Lending): not within the hour after serving took lent GPUs back, when
// the growth would come back within minutes.
func TestElasticBorrowerGrowsOnlyWhileThePoolIsLent(t *testing.T) {
	nodes := schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 4, GPUs: 8, Pool: "inference"})
	nodes = append(nodes, schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 1, GPUs: 8, Pool: "training", FirstPod: 1, FirstNode: 4})...)
	cfg := Config{Pools: Pools{Training: "training", Inference: "inference", BorrowInference: true}, Standby: -1}
	j := elasticJob("el", model.JobRunning)
	j.Size = 16
	allocs := wholeNodes("el", times(2*time.Hour, 2*time.Hour), 0, 1)
	for i := range allocs {
		allocs[i].Borrowed = true
	}
	reclaim := []PreemptionRecord{{At: elasticNow.Add(-10 * time.Minute), JobID: "gone", GPUs: 8, Reclaim: true}}
	for _, tt := range []struct {
		name   string
		recent []PreemptionRecord
		want   int
	}{
		{"lent: grows onto the two idle inference nodes", nil, 16},
		{"serving took GPUs back 10 minutes ago: no growth", reclaim, 0},
	} {
		s := State{Nodes: nodes, Jobs: JobsOf([]model.Job{j}), Allocations: allocs, Config: cfg, RecentPreemptions: tt.recent}
		got, b := bindGPUs(Plan(s, elasticNow), "el")
		if got != tt.want {
			t.Errorf("%s: grew by %d GPUs (%+v), want %d", tt.name, got, b, tt.want)
		}
		if b != nil && !b.Borrowed {
			t.Errorf("%s: growth on the inference pool not marked borrowed: %+v", tt.name, b)
		}
	}
}
