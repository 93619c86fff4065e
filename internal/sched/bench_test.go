package sched

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched/schedtest"
)

// The benchmarks behind BENCHMARKS.md. Run them on one core:
//   go test ./internal/sched -run '^$' -bench . -cpu 1 -benchtime 2s

var benchSizes = []int{128, 1250, 12500}

// benchFleet is nodes × 8 H100 in pods of 32.
func benchFleet(nodes int) []model.Node {
	return schedtest.Fleet(schedtest.Spec{Pods: (nodes + 31) / 32, NodesPerPod: 32, GPUs: 8})[:nodes]
}

// warmAllocs fills about 60% of the fleet with 1, 2 and 4-GPU work through
// the placer, then frees a random quarter of it: a churned, realistic
// state with whole nodes scarce but present.
func warmAllocs(nodes []model.Node) []model.Allocation {
	ix := NewIndex(nodes, nil, Config{})
	rng := rand.New(rand.NewPCG(7, 7))
	var out []model.Allocation
	target := len(nodes) * 8 * 6 / 10
	used := 0
	for used < target {
		g := []int{1, 2, 4}[rng.IntN(3)]
		req := model.Request{Shape: model.Shape{GPUs: g, Topology: model.TopologyNode}}
		pl, why := ix.Place(&req, Pools{})
		if why != nil {
			break
		}
		out = append(out, model.Allocation{ID: fmt.Sprint(len(out)), NodeID: pl.Parts[0].Node, GPUs: pl.Parts[0].GPUs})
		used += g
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:len(out)*3/4]
}

// p99 reports the 99th percentile of per-operation latencies.
func reportP99(b *testing.B, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkPlaceNode8 places one 8-GPU `node` request on a warm fleet and
// releases it again, so every iteration sees the same state.
func BenchmarkPlaceNode8(b *testing.B) {
	for _, n := range benchSizes {
		nodes := benchFleet(n)
		allocs := warmAllocs(nodes)
		req := model.Request{Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}}
		b.Run(fmt.Sprintf("nodes=%d/index", n), func(b *testing.B) {
			ix := NewIndex(nodes, allocs, Config{})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				pl, why := ix.Place(&req, Pools{})
				lat = append(lat, time.Since(t0))
				if why != nil {
					b.Fatal(why)
				}
				ix.Release(model.Allocation{NodeID: pl.Parts[0].Node, GPUs: pl.Parts[0].GPUs})
			}
			reportP99(b, lat)
		})
		b.Run(fmt.Sprintf("nodes=%d/naive", n), func(b *testing.B) {
			ref := newRef(nodes, allocs, Config{})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				j, _ := ref.bestNode(&req)
				lat = append(lat, time.Since(t0))
				if j < 0 {
					b.Fatal("naive found no node")
				}
			}
			reportP99(b, lat)
		})
	}
}

// BenchmarkLargest computes largest_placeable on a warm fleet: from bucket
// and pod totals (index) versus a walk over every node (naive: the largest
// free node set and per-pod sums, the cheapest honest scan).
func BenchmarkLargest(b *testing.B) {
	for _, n := range benchSizes {
		nodes := benchFleet(n)
		allocs := warmAllocs(nodes)
		b.Run(fmt.Sprintf("nodes=%d/index", n), func(b *testing.B) {
			ix := NewIndex(nodes, allocs, Config{})
			for i := 0; i < b.N; i++ {
				_ = ix.Largest()
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/naive", n), func(b *testing.B) {
			ref := newRef(nodes, allocs, Config{})
			for i := 0; i < b.N; i++ {
				_ = ref.scanLargest()
			}
		})
	}
}

// fillStream is 100,000 1-GPU inference replicas with a `pod` gang of
// 64-256 GPUs after every 100 of them: 1,000 gangs.
func fillStream() []model.Request {
	rng := rand.New(rand.NewPCG(3, 3))
	var out []model.Request
	for i := 0; i < 100000; i++ {
		out = append(out, model.Request{Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, Kind: model.OwnerInference})
		if i%100 == 99 {
			out = append(out, model.Request{Shape: model.Shape{GPUs: 64 + rng.IntN(193), Topology: model.TopologyPod}, Kind: model.OwnerTraining})
		}
	}
	return out
}

// BenchmarkFill100k fills an empty 12,500-node (100k GPU) fleet with the
// stream above. The fleet runs out part-way (the stream asks for ~260k
// GPUs), so both placements and rejections are timed.
func BenchmarkFill100k(b *testing.B) {
	nodes := benchFleet(12500)
	stream := fillStream()
	b.Run("index", func(b *testing.B) {
		var placed, used int
		var elapsed time.Duration
		for i := 0; i < b.N; i++ {
			ix := NewIndex(nodes, nil, Config{})
			placed = 0
			t0 := time.Now()
			for j := range stream {
				if _, why := ix.Place(&stream[j], Pools{}); why == nil {
					placed++
				}
			}
			elapsed += time.Since(t0)
			used = 100000 - ix.Summary(false).FreeGPUs
		}
		b.ReportMetric(float64(placed), "placed")
		b.ReportMetric(float64(used), "gpus-used")
		b.ReportMetric(float64(len(stream)*b.N)/elapsed.Seconds(), "attempts/s")
		b.ReportMetric(float64(placed*b.N)/elapsed.Seconds(), "placements/s")
	})
	b.Run("naive", func(b *testing.B) {
		var placed int
		var elapsed time.Duration
		for i := 0; i < b.N; i++ {
			ref := newRef(nodes, nil, Config{})
			placed = 0
			t0 := time.Now()
			for j := range stream {
				if ref.place(&stream[j]) {
					placed++
				}
			}
			elapsed += time.Since(t0)
		}
		b.ReportMetric(float64(placed), "placed")
		b.ReportMetric(float64(len(stream)*b.N)/elapsed.Seconds(), "attempts/s")
		b.ReportMetric(float64(placed*b.N)/elapsed.Seconds(), "placements/s")
	})
}

// BenchmarkBuildIndex is the cost Plan pays up front to index a snapshot.
func BenchmarkBuildIndex(b *testing.B) {
	for _, n := range benchSizes {
		nodes := benchFleet(n)
		allocs := warmAllocs(nodes)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = NewIndex(nodes, allocs, Config{})
			}
		})
	}
}
