package kube

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// The same workload makes the same placements through the API server as
// through the core directly, the way the simulator calls it: a fleet of
// two leaves with other schedulers' pods in it, and a mix of shapes and
// topologies submitted at once. The model side is built from the
// workload's own table, not from what kube read.
func TestSamePlacementsAsTheCore(t *testing.T) {
	e := newEnv(t)
	nodes := e.twoLeaves()
	var allocs []model.Allocation
	for i, busy := range []struct {
		node string
		gpus int
	}{{"l1n0", 3}, {"l1n1", 5}, {"l2n0", 2}, {"l2n2", 6}} {
		name := fmt.Sprintf("other-%d", i)
		e.pod(name, busy.gpus, e.on(busy.node))
		allocs = append(allocs, model.Allocation{ID: e.ns + "/" + name, NodeID: e.ns + "-" + busy.node,
			GPUs: model.FullMask(busy.gpus), OwnerKind: model.OwnerTraining, OwnerID: "pod:" + e.ns + "/" + name})
	}
	type gang struct {
		name     string
		pods     int
		perPod   int
		topology model.Topology
		priority int
	}
	work := []gang{{"tp8", 1, 8, model.TopologyNode, 5}, {"g16", 2, 8, model.TopologyPod, 3},
		{"s1", 1, 1, model.TopologyNode, 0}, {"s2", 1, 1, model.TopologyNode, 0}, {"s3", 1, 3, model.TopologyNode, 1},
		{"w4", 4, 2, model.TopologyNode, 2}, {"a8", 2, 4, model.TopologyAny, 0}, {"big", 3, 8, model.TopologyPod, 9}}
	var jobs []*model.Job
	for _, g := range work {
		var first string
		for i := range g.pods {
			name := fmt.Sprintf("%s-%d", g.name, i)
			p := e.pod(name, g.perPod, ann(AnnGroup, g.name, AnnGroupSize, fmt.Sprint(g.pods),
				AnnTopology, string(g.topology), AnnPriority, fmt.Sprint(g.priority)))
			if first == "" {
				first = name
				jobs = append(jobs, &model.Job{ID: e.ns + "/" + g.name, Name: g.name, State: model.JobPending,
					Shape:    model.Shape{GPUs: g.pods * g.perPod, Topology: g.topology, Worker: g.perPod},
					Priority: g.priority, SubmittedAt: p.CreationTimestamp.Time})
			}
		}
	}
	s := e.scheduler(1)
	now := s.cfg.Clock()
	want := map[string]string{}
	d := sched.Plan(sched.State{Nodes: nodes, Allocations: allocs, Jobs: jobs, Config: s.cfg.Sched}, now)
	for _, b := range d.Binds {
		g := work[0]
		for _, w := range work {
			if e.ns+"/"+w.name == b.OwnerID {
				g = w
			}
		}
		i := 0
		for _, pt := range b.Parts {
			idx := pt.GPUs.Indices()
			for k := 0; k < len(idx); k += g.perPod {
				var m model.GPUMask
				for _, x := range idx[k : k+g.perPod] {
					m |= model.GPUMask(1) << x
				}
				want[fmt.Sprintf("%s-%d", g.name, i)] = strings.TrimPrefix(pt.Node, e.ns+"-") + " " + formatGPUs(m)
				i++
			}
		}
	}
	if len(d.Binds) < 4 || len(d.Pending) == 0 {
		t.Fatalf("the workload should both place and leave work pending: %d binds, %d pending", len(d.Binds), len(d.Pending))
	}
	e.pass(s)
	got := map[string]string{}
	for _, g := range work {
		for i := range g.pods {
			name := fmt.Sprintf("%s-%d", g.name, i)
			if node, gpus := e.boundTo(name); node != "" {
				got[name] = node + " " + gpus
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("placements through the API server differ from the core's (-core +kube):\n%s", diff)
	}
}
