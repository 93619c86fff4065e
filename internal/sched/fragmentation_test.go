package sched_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/sched/schedtest"
)

// TestFragmentationTable checks the design's §2 table: on 128 nodes × 8
// GPUs at 50% occupancy, topology-blind random placement leaves about
// 128 × 0.5^8 = 0.5 fully free nodes, so a TP8 job cannot be placed, while
// berth's best-fit leaves half the fleet whole.
func TestFragmentationTable(t *testing.T) {
	const nodes, gpus, seeds = 128, 8, 40
	fleet := schedtest.Fleet(schedtest.Spec{Pods: 4, NodesPerPod: 32, GPUs: gpus})
	for _, f := range []float64{0.5, 0.7, 0.9} {
		used := int(math.Round(float64(nodes*gpus) * (1 - f)))
		want := float64(nodes) * math.Pow(f, gpus) // the table's expectation

		// Random placement: each used GPU is a uniformly random GPU.
		var randomFull float64
		for seed := uint64(0); seed < seeds; seed++ {
			rng := rand.New(rand.NewPCG(seed, 8))
			taken := map[int]bool{}
			for len(taken) < used {
				taken[rng.IntN(nodes*gpus)] = true
			}
			for n := 0; n < nodes; n++ {
				full := true
				for g := 0; g < gpus; g++ {
					full = full && !taken[n*gpus+g]
				}
				if full {
					randomFull++
				}
			}
		}
		randomFull /= seeds
		if math.Abs(randomFull-want) > 0.35*want+1 {
			t.Errorf("f=%.1f: random placement left %.2f fully free nodes on average, the table says %.2f", f, randomFull, want)
		}

		// berth: the same demand as 1-GPU requests through the placer.
		ix := sched.NewIndex(fleet, nil, sched.Config{})
		for i := 0; i < used; i++ {
			req := model.Request{Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, Kind: model.OwnerTraining}
			if _, why := ix.Place(&req, sched.Pools{}); why != nil {
				t.Fatalf("f=%.1f: request %d not placed: %s", f, i, why.Message)
			}
		}
		s := ix.Summary(false)
		wantFull := nodes - (used+gpus-1)/gpus
		if s.FreeNodesFull != wantFull || s.LargestPlaceable.Node != gpus {
			t.Errorf("f=%.1f: berth left %d fully free nodes (largest node set %d), want %d and 8",
				f, s.FreeNodesFull, s.LargestPlaceable.Node, wantFull)
		}
		t.Logf("free %.0f%%: random %.2f fully free nodes (table %.2f), berth %d", f*100, randomFull, want, s.FreeNodesFull)
	}
}

// TestMixedStreamKeepsWholeNodes: a churning stream of 1, 2 and 4-GPU work
// at about half occupancy leaves berth with whole nodes to spare for TP8.
func TestMixedStreamKeepsWholeNodes(t *testing.T) {
	fleet := schedtest.Fleet(schedtest.Spec{Pods: 4, NodesPerPod: 32, GPUs: 8})
	ix := sched.NewIndex(fleet, nil, sched.Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	type live struct {
		a []model.Allocation
	}
	var running []live
	used := 0
	for step := 0; step < 20000; step++ {
		if used > 512 || (len(running) > 0 && rng.IntN(2) == 0) {
			k := rng.IntN(len(running))
			for _, a := range running[k].a {
				ix.Release(a)
				used -= a.GPUs.Count()
			}
			running[k] = running[len(running)-1]
			running = running[:len(running)-1]
			continue
		}
		g := []int{1, 2, 4}[rng.IntN(3)]
		req := model.Request{Shape: model.Shape{GPUs: g, Topology: model.TopologyNode}, Kind: model.OwnerTraining}
		pl, why := ix.Place(&req, sched.Pools{})
		if why != nil {
			t.Fatalf("step %d: %s", step, why.Message)
		}
		var l live
		for _, p := range pl.Parts {
			l.a = append(l.a, model.Allocation{NodeID: p.Node, GPUs: p.GPUs})
		}
		running = append(running, l)
		used += g
	}
	s := ix.Summary(false)
	// At ~50% occupancy perfect packing leaves 64 whole nodes; random
	// placement would leave about half of one.
	if s.FreeNodesFull < 48 {
		t.Fatalf("after churn at ~%d GPUs used, only %d of 128 nodes are whole (largest node set %d)", used, s.FreeNodesFull, s.LargestPlaceable.Node)
	}
	t.Logf("%d GPUs used, %d whole nodes, %d fragmented free GPUs", used, s.FreeNodesFull, s.FragmentedGPUs)
}
