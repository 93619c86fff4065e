package sched

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

var benchNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// busyState is a 12,500-node fleet (pods of 32) where every node runs
// allocsPerNode jobs of 8/allocsPerNode GPUs, preemptible and borrowed
// (fair game for victims) when preemptible is set, plus pending jobs of
// mixed shapes.
func busyState(nodes, allocsPerNode, pending int, preemptible bool) State {
	s := State{Nodes: benchFleet(nodes)}
	per := 8 / allocsPerNode
	rng := rand.New(rand.NewPCG(11, 11))
	for i, n := range s.Nodes {
		for a := 0; a < allocsPerNode; a++ {
			id := fmt.Sprintf("run-%d-%d", i, a)
			j := model.Job{ID: id, Shape: model.Shape{GPUs: per, Topology: model.TopologyNode}, Priority: rng.IntN(10),
				Preemptible: preemptible, State: model.JobRunning, SubmittedAt: benchNow.Add(-3 * time.Hour),
				StartedAt: benchNow.Add(-time.Duration(30+rng.IntN(600)) * time.Minute)}
			if preemptible {
				j.Checkpoint = &model.Checkpoint{Path: "/c", SizeBytes: 1e9}
			}
			s.Jobs = append(s.Jobs, &j)
			s.Allocations = append(s.Allocations, model.Allocation{ID: "a-" + id, NodeID: n.ID, GPUs: model.FullMask(per) << uint(a*per),
				OwnerKind: model.OwnerTraining, OwnerID: id, Preemptible: preemptible, Borrowed: preemptible, CreatedAt: j.StartedAt})
		}
	}
	shapes := []model.Shape{{GPUs: 1, Topology: model.TopologyNode}, {GPUs: 2, Topology: model.TopologyNode}, {GPUs: 4, Topology: model.TopologyNode},
		{GPUs: 8, Topology: model.TopologyNode}, {GPUs: 64, Topology: model.TopologyPod}, {GPUs: 256, Topology: model.TopologyPod}}
	for i := 0; i < pending; i++ {
		s.Jobs = append(s.Jobs, &model.Job{ID: fmt.Sprintf("q-%d", i), Team: "t", Shape: shapes[rng.IntN(len(shapes))], Priority: rng.IntN(100),
			State: model.JobPending, SubmittedAt: benchNow.Add(-time.Duration(rng.IntN(10000)) * time.Second)})
	}
	return s
}

// BenchmarkPlanPending is one full Plan pass over a full 12,500-node fleet
// with N pending jobs that mostly cannot run.
func BenchmarkPlanPending(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000, 1000000} {
		s := busyState(12500, 2, n, false)
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = Plan(s, benchNow)
			}
		})
	}
}

// BenchmarkPlanPendingModel is BenchmarkPlanPending at 100k with every
// pending job naming its GPU model, as jobs submitted with gpu_model do
// (berth loadgen's among them).
func BenchmarkPlanPendingModel(b *testing.B) {
	s := busyState(12500, 2, 100000, false)
	for _, j := range s.Jobs {
		if j.State == model.JobPending {
			j.Shape.Models = []string{"H100"}
		}
	}
	for i := 0; i < b.N; i++ {
		_ = Plan(s, benchNow)
	}
}

// BenchmarkPlanBinding is a pass of a fleet coming up beside its queue:
// 12,500 empty 8-GPU nodes and 100k pending 1-GPU jobs. Uncapped, the
// pass places 100k jobs; the control loop writes max_binds_per_pass
// (1,000) of them a pass, and with the cap in the core it places no more.
func BenchmarkPlanBinding(b *testing.B) {
	s := State{Nodes: benchFleet(12500)}
	for i := range 100000 {
		s.Jobs = append(s.Jobs, &model.Job{ID: fmt.Sprintf("q-%d", i), Team: "t", Shape: model.Shape{GPUs: 1, Topology: model.TopologyAny},
			State: model.JobPending, SubmittedAt: benchNow.Add(-time.Duration(i) * time.Millisecond)})
	}
	for _, cap := range []int{0, 1000} {
		s.Config.MaxBinds = cap
		b.Run(fmt.Sprintf("max_binds=%d", cap), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = Plan(s, benchNow)
			}
		})
	}
}

// BenchmarkRejectGang: a 512-GPU pod gang on a busy 12,500-node fleet
// where no pod can take it, even with every victim gone (pods hold 256
// GPUs). Placement fails from pod totals; the victim search is refused
// from per-pod reclaimable totals, without walking allocations.
func BenchmarkRejectGang(b *testing.B) {
	s := busyState(12500, 2, 0, true)
	p := newBenchPlanner(s)
	req := model.Request{Shape: model.Shape{GPUs: 512, Topology: model.TopologyPod}, Kind: model.OwnerTraining, Preemptible: true}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, why := p.ix.place(&req, p.cfg.Pools, placeOpts{}); why == nil {
			b.Fatal("placed")
		}
		if !p.roomImpossible(&req) {
			b.Fatal("the pod summaries should rule preemption out")
		}
	}
}

// BenchmarkVictims256: choose the victims for a 256-GPU pod gang on a
// 12,500-node fleet running 50,000 preemptible 2-GPU allocations.
func BenchmarkVictims256(b *testing.B) {
	s := busyState(12500, 4, 0, true)
	req := model.Request{Shape: model.Shape{GPUs: 256, Topology: model.TopologyPod}, Kind: model.OwnerTraining, Preemptible: true}
	p := newBenchPlanner(s)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := p.makeRoom(&req, func(*victim) bool { return true }, "")
		if r == nil || len(r.victims) != 128 {
			b.Fatalf("got %v", r)
		}
	}
}

func newBenchPlanner(s State) *planner {
	return newPlanner(&s, NewIndex(s.Nodes, s.Allocations, s.Config), benchNow)
}

// BenchmarkMemoryMillionJobs measures what 12,500 nodes and 1,000,000
// queued jobs take in memory, held as a State and indexed, and one Plan
// pass over them.
func BenchmarkMemoryMillionJobs(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := busyState(12500, 2, 1000000, false)
		ix := NewIndex(s.Nodes, s.Allocations, Config{})
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
		start := time.Now()
		_ = Plan(s, benchNow)
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-plan")
		var peak runtime.MemStats
		runtime.ReadMemStats(&peak)
		b.ReportMetric(float64(peak.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-after-plan")
		runtime.KeepAlive(ix)
	}
}

// BenchmarkPlanHostileReplicas: one pass on a busy 1,250-node fleet with
// a share (gpu_milli) job pending, without and with a deployment asking
// for a billion 1-GPU replicas. A pass's cost is bounded by the fleet,
// never by a number a tenant chose: the two must cost about the same
// (BENCHMARKS.md).
func BenchmarkPlanHostileReplicas(b *testing.B) {
	for _, hostile := range []bool{false, true} {
		s := busyState(1250, 2, 1000, false)
		s.Jobs = append(s.Jobs, &model.Job{ID: "share", Team: "t", State: model.JobPending, QueuedAt: benchNow,
			Shape: model.Shape{GPUs: 1, GPUMilli: 250, Topology: model.TopologyNode}})
		if hostile {
			s.Deployments = append(s.Deployments, model.Deployment{ID: "greedy", MinReplicas: 0, MaxReplicas: 1e9, Desired: 1e9,
				ReplicaShape: model.Shape{GPUs: 1, Topology: model.TopologyNode}})
		}
		b.Run(fmt.Sprintf("billion_replicas=%v", hostile), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = Plan(s, benchNow)
			}
		})
	}
}

// BenchmarkPlanFullFleet is the pass of a fleet at work: 12,500 nodes each
// running eight 1-GPU jobs (100k allocations) and a queue behind them.
func BenchmarkPlanFullFleet(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		s := busyState(12500, 8, n, false)
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = Plan(s, benchNow)
			}
		})
	}
}

// BenchmarkPlanAgedHead is a full 12,500-node fleet of preemptible work
// (priority 0-9) with 100k pending 8-GPU jobs of priority 50 behind one
// of priority 0 that has waited 40 hours: its waiting bonus ranks it
// first, and the pass must not search for room again for each job behind
// it (frontier).
func BenchmarkPlanAgedHead(b *testing.B) {
	s := busyState(12500, 1, 0, true)
	node := model.Shape{GPUs: 8, Topology: model.TopologyNode}
	s.Jobs = append(s.Jobs, &model.Job{ID: "aged", Team: "t", Shape: node, Preemptible: true, State: model.JobPending, SubmittedAt: benchNow.Add(-40 * time.Hour)})
	for i := 0; i < 100000; i++ {
		s.Jobs = append(s.Jobs, &model.Job{ID: fmt.Sprintf("q-%d", i), Team: "t", Shape: node, Priority: 50, Preemptible: true,
			State: model.JobPending, SubmittedAt: benchNow.Add(-time.Duration(i) * time.Second)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = Plan(s, benchNow)
	}
}
