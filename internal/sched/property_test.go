package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/berthsched/berth/internal/model"
)

var (
	models = []string{"H100", "A100", "T4"}
	sizes  = []int{1, 2, 4, 8, 16}
)

// genFleet draws a heterogeneous fleet: a few groups of nodes that differ
// in GPU model and count, spread over pods, some of them unschedulable or
// with a quarantined GPU.
func genFleet(t *rapid.T, pooled bool) ([]model.Node, Config) {
	var nodes []model.Node
	groups := rapid.IntRange(1, 3).Draw(t, "groups")
	pools := []string{"training", "inference", "small"}
	for g := 0; g < groups; g++ {
		size := rapid.SampledFrom(sizes).Draw(t, "size")
		mdl := rapid.SampledFrom(models).Draw(t, "model")
		pods := rapid.IntRange(1, 3).Draw(t, "pods")
		perPod := rapid.IntRange(1, 5).Draw(t, "perPod")
		for p := 0; p < pods; p++ {
			for n := 0; n < perPod; n++ {
				node := model.Node{ID: fmt.Sprintf("n%03d", len(nodes)), Pod: fmt.Sprintf("pod-%d", p), Model: mdl, GPUs: size,
					CPUMilli: int64(size) * 16000, MemoryMiB: int64(size) * 1024, Health: model.HealthHealthy}
				switch rapid.IntRange(0, 12).Draw(t, "state") {
				case 0:
					node.Quarantined = true
				case 1:
					node.Draining = true
				case 2:
					node.Health = model.HealthUnhealthy
				case 3:
					node.QuarantinedGPUs = model.MaskOf(rapid.IntRange(0, size-1).Draw(t, "badGPU"))
				}
				if pooled {
					node.Pool = rapid.SampledFrom(pools).Draw(t, "pool")
				}
				nodes = append(nodes, node)
			}
		}
	}
	cfg := Config{}
	if pooled {
		cfg.Pools = DefaultPools()
		cfg.Pools.Swap = ""
	}
	return nodes, cfg
}

func genRequest(t *rapid.T, withResources bool) model.Request {
	req := model.Request{
		Shape: model.Shape{GPUs: rapid.IntRange(1, 40).Draw(t, "gpus"),
			Topology: rapid.SampledFrom(model.Topologies).Draw(t, "topology")},
		Kind:        rapid.SampledFrom([]model.OwnerKind{model.OwnerTraining, model.OwnerInference}).Draw(t, "kind"),
		Preemptible: rapid.Bool().Draw(t, "preemptible"),
	}
	if req.Topology == model.TopologyNode {
		req.GPUs = rapid.IntRange(1, 16).Draw(t, "nodeGPUs")
	}
	if rapid.IntRange(0, 4).Draw(t, "constrained") == 0 {
		req.Models = []string{rapid.SampledFrom(models).Draw(t, "wantModel")}
	}
	if withResources {
		req.CPUMilli = int64(rapid.IntRange(0, 200000).Draw(t, "cpu"))
		req.MemoryMiB = int64(rapid.IntRange(0, 20000).Draw(t, "mem"))
	}
	return req
}

// TestPlacementProperties drives the index through random request and
// release streams on random heterogeneous fleets and checks every safety
// rule after every step, and agreement with the naive reference.
func TestPlacementProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pooled := rapid.IntRange(0, 3).Draw(t, "pooled") == 0
		nodes, cfg := genFleet(t, pooled)
		byID := map[string]*model.Node{}
		for i := range nodes {
			byID[nodes[i].ID] = &nodes[i]
		}
		ix := NewIndex(nodes, nil, cfg)
		var ledger []model.Allocation
		owners := map[string][]model.Allocation{}
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for s := 0; s < steps; s++ {
			if len(owners) > 0 && rapid.IntRange(0, 3).Draw(t, "release") == 0 {
				id := rapid.SampledFrom(sortedOwners(owners)).Draw(t, "victim")
				for _, a := range owners[id] {
					ix.Release(a)
				}
				ledger = dropOwner(ledger, id)
				delete(owners, id)
			} else {
				req := genRequest(t, rapid.Bool().Draw(t, "resources"))
				req.OwnerID = fmt.Sprintf("r%d", s)
				ref := newRef(nodes, ledger, cfg)
				pl, why := ix.Place(&req, cfg.Pools)
				if why != nil {
					checkNotPlaced(t, ix, ref, &req, why)
				} else {
					allocs := checkPlacement(t, byID, ledger, &req, pl, cfg)
					checkAgreement(t, ix, ref, &req, pl)
					ledger = append(ledger, allocs...)
					owners[req.OwnerID] = allocs
				}
			}
			// The incrementally updated index must equal one built afresh.
			fresh := NewIndex(nodes, ledger, cfg)
			if diff := cmp.Diff(fresh.Summary(true), ix.Summary(true)); diff != "" {
				t.Fatalf("step %d: incremental index drifted from a fresh build (-fresh +incremental):\n%s", s, diff)
			}
			if !pooled {
				if want, got := newRef(nodes, ledger, cfg).largest(), ix.Largest(); want != got {
					t.Fatalf("step %d: largest_placeable %+v, brute force says %+v", s, got, want)
				}
			}
		}
	})
}

func checkNotPlaced(t *rapid.T, ix *Index, ref *refFleet, req *model.Request, why *Reason) {
	if why.Message == "" || why.Constraint == "" {
		t.Fatalf("%+v: reason has no message or constraint: %+v", req.Shape, why)
	}
	if req.Topology == model.TopologyNode {
		if i, _ := ref.bestNode(req); i >= 0 {
			t.Fatalf("%+v: index found no node, reference found %s", req.Shape, ref.nodes[i].n.ID)
		}
	}
	if req.CPUMilli == 0 && req.MemoryMiB == 0 && ref.feasible(req) {
		t.Fatalf("%+v (%s): index found no placement, reference says it fits (reason: %s)", req.Shape, req.Kind, why.Message)
	}
}

// checkPlacement checks the safety rules and returns the allocations.
func checkPlacement(t *rapid.T, byID map[string]*model.Node, ledger []model.Allocation, req *model.Request, pl Placement, cfg Config) []model.Allocation {
	used := map[string]model.GPUMask{}
	cpu, mem := map[string]int64{}, map[string]int64{}
	for _, a := range ledger {
		used[a.NodeID] |= a.GPUs
		cpu[a.NodeID] += a.CPUMilli
		mem[a.NodeID] += a.MemoryMiB
	}
	if pl.GPUs() != req.GPUs {
		t.Fatalf("%+v: placed %d GPUs", req.Shape, pl.GPUs())
	}
	if req.Topology == model.TopologyNode && len(pl.Parts) != 1 {
		t.Fatalf("node-topology request spans %d nodes", len(pl.Parts))
	}
	var out []model.Allocation
	pods := map[string]bool{}
	var cpuSum, memSum int64
	for _, pt := range pl.Parts {
		n := byID[pt.Node]
		switch {
		case n == nil:
			t.Fatalf("placement on unknown node %s", pt.Node)
		case !n.Schedulable():
			t.Fatalf("placement on unschedulable node %s", n.ID)
		case pt.GPUs&n.QuarantinedGPUs != 0:
			t.Fatalf("placement on quarantined GPUs of %s", n.ID)
		case pt.GPUs&^model.FullMask(n.GPUs) != 0:
			t.Fatalf("mask %s beyond %s's %d GPUs", pt.GPUs, n.ID, n.GPUs)
		case used[n.ID]&pt.GPUs != 0:
			t.Fatalf("GPU %s on %s is in two allocations", used[n.ID]&pt.GPUs, n.ID)
		case cpu[n.ID]+pt.CPUMilli > n.CPUMilli || mem[n.ID]+pt.MemoryMiB > n.MemoryMiB:
			t.Fatalf("%s over cpu or memory", n.ID)
		case !req.AcceptsModel(n.Model):
			t.Fatalf("%s has model %s, request wants %v", n.ID, n.Model, req.Models)
		case cfg.Pools.configured() && n.Pool != pl.Pool:
			t.Fatalf("%s is in pool %s, placement says %s", n.ID, n.Pool, pl.Pool)
		}
		if req.GPUs%n.GPUs == 0 && req.Topology != model.TopologyNode && pt.GPUs != model.FullMask(n.GPUs) {
			t.Fatalf("%d-GPU request took part of %s (%d GPUs): multiples of the node size take whole nodes", req.GPUs, n.ID, n.GPUs)
		}
		used[n.ID] |= pt.GPUs
		cpu[n.ID] += pt.CPUMilli
		mem[n.ID] += pt.MemoryMiB
		cpuSum += pt.CPUMilli
		memSum += pt.MemoryMiB
		pods[n.Pod] = true
		out = append(out, model.Allocation{ID: fmt.Sprintf("%s/%s", req.OwnerID, pt.Node), NodeID: pt.Node, GPUs: pt.GPUs,
			CPUMilli: pt.CPUMilli, MemoryMiB: pt.MemoryMiB, OwnerKind: req.Kind, OwnerID: req.OwnerID})
	}
	if req.Topology == model.TopologyPod && len(pods) != 1 {
		t.Fatalf("pod-topology request spans %d pods", len(pods))
	}
	if cpuSum < req.CPUMilli || memSum < req.MemoryMiB {
		t.Fatalf("placement carries %d cpu / %d mem, request asked %d / %d", cpuSum, memSum, req.CPUMilli, req.MemoryMiB)
	}
	if pl.Borrowed && (req.Kind == model.OwnerInference || !req.Preemptible) {
		t.Fatalf("%s request borrowed capacity without being preemptible training", req.Kind)
	}
	return out
}

// checkAgreement holds a node placement to the reference's best R1 score.
func checkAgreement(t *rapid.T, ix *Index, ref *refFleet, req *model.Request, pl Placement) {
	if req.Topology != model.TopologyNode {
		return
	}
	_, want := ref.bestNode(req)
	// Score the chosen node as it was before this placement.
	for i := range ref.nodes {
		if ref.nodes[i].n.ID == pl.Parts[0].Node {
			if got := ref.nodes[i].score(req.GPUs); got != want {
				t.Fatalf("%+v: index chose %s with score %+v, reference best is %+v", req.Shape, pl.Parts[0].Node, got, want)
			}
		}
	}
}

// TestPlanDeterministic: the same state and time give the same decision.
func TestPlanDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, cfg := genFleet(t, rapid.Bool().Draw(t, "pooled"))
		jobs, deps := genWork(t, 12, 3)
		s := State{Nodes: nodes, Jobs: JobsOf(jobs), Deployments: deps, Config: cfg}
		now := time.Unix(1000, 0)
		a, b := Plan(s, now), Plan(s, now)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("two passes over one state differ:\n%s", diff)
		}
		// A kept index gives the same decision and comes back unchanged.
		ix := NewIndex(s.Nodes, s.Allocations, s.Config)
		before := ix.Summary(true)
		if diff := cmp.Diff(a, PlanOn(ix, s, now)); diff != "" {
			t.Fatalf("PlanOn differs from Plan:\n%s", diff)
		}
		if diff := cmp.Diff(before, ix.Summary(true)); diff != "" {
			t.Fatalf("PlanOn left the index changed:\n%s", diff)
		}
	})
}

// genWork draws up to maxJobs pending training jobs and up to maxDeps
// deployments for a pass.
func genWork(t *rapid.T, maxJobs, maxDeps int) ([]model.Job, []model.Deployment) {
	var jobs []model.Job
	for i := rapid.IntRange(0, maxJobs).Draw(t, "jobs"); i > 0; i-- {
		req := genRequest(t, false)
		jobs = append(jobs, model.Job{ID: fmt.Sprintf("j%02d", i), Shape: req.Shape, Priority: rapid.IntRange(0, 3).Draw(t, "prio"),
			State: model.JobPending, SubmittedAt: time.Unix(int64(rapid.IntRange(0, 100).Draw(t, "at")), 0)})
	}
	var deps []model.Deployment
	for i := rapid.IntRange(0, maxDeps).Draw(t, "deps"); i > 0; i-- {
		g := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "replicaGPUs")
		deps = append(deps, model.Deployment{ID: fmt.Sprintf("d%d", i), ReplicaShape: model.Shape{GPUs: g, Topology: model.TopologyNode},
			MinReplicas: 1, MaxReplicas: 4, Desired: rapid.IntRange(0, 4).Draw(t, "desired")})
	}
	return jobs, deps
}

func sortedOwners(m map[string][]model.Allocation) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

func dropOwner(ledger []model.Allocation, id string) []model.Allocation {
	out := ledger[:0:0]
	for _, a := range ledger {
		if a.OwnerID != id {
			out = append(out, a)
		}
	}
	return out
}
