package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// Policy decides one pass. Prepare says how the policy runs the fleet
// (berth labels shape pools; static-split halves it).
type Policy interface {
	Name() string
	// Prepare returns the nodes as the policy runs them, its core config,
	// and a note for the report when it departs from its usual setup.
	Prepare(w *Workload) ([]model.Node, sched.Config, string)
	Plan(v *View, now time.Time) sched.Decision
}

// PolicyNames lists the policies `berth sim` compares.
var PolicyNames = []string{"static-split", "first-fit", "worst-fit", "random", "best-fit", "berth"}

// DefaultPolicies is what a report compares unless told: every policy,
// then the two relaxation rows (bound.go).
var DefaultPolicies = append(slices.Clone(PolicyNames), FluidName, BoundName)

// NewPolicy returns the named policy; random ones draw from seed.
func NewPolicy(name string, seed uint64) (Policy, error) {
	switch name {
	case "berth":
		return berthPolicy{}, nil
	case "berth-rigid":
		return berthPolicy{rigid: true}, nil
	case "best-fit":
		return newBaseline(name, pickBest, true, false, seed), nil
	case "static-split":
		return newBaseline(name, pickBest, true, true, seed), nil
	case "first-fit":
		return newBaseline(name, pickFirst, false, false, seed), nil
	case "worst-fit":
		return newBaseline(name, pickWorst, false, false, seed), nil
	case "random":
		return newBaseline(name, pickRandom, false, false, seed), nil
	}
	return nil, fmt.Errorf("policy: %q is not one of %s, berth-rigid", name, strings.Join(PolicyNames, ", "))
}

// CheckPolicy reports whether name may be asked of a report: a policy, or
// a relaxation row (computed, not run).
func CheckPolicy(name string) error {
	if _, ok := relaxations[name]; ok || name == FluidMatchName {
		return nil
	}
	if _, err := NewPolicy(name, 0); err != nil {
		return fmt.Errorf("policy: %q is not one of %s, berth-rigid, %s, %s, %s, %s", name, strings.Join(PolicyNames, ", "), FluidName, FluidSLOName, FluidMatchName, BoundName)
	}
	return nil
}

// berthPolicy is the scheduling core, exactly as the server runs it.
// berth-rigid is the same core with every elastic job submitted rigid at
// its maximum: elastic training's own comparison, same jobs, same run.
type berthPolicy struct{ rigid bool }

func (p berthPolicy) Name() string {
	if p.rigid {
		return "berth-rigid"
	}
	return "berth"
}

// Elastic reports whether the policy runs elastic jobs as elastic (the
// baselines, which cannot resize a job, run them rigid at their maximum).
func (p berthPolicy) Elastic() bool { return !p.rigid }

// elasticAware is a policy that resizes elastic jobs.
type elasticAware interface{ Elastic() bool }

func (berthPolicy) Plan(v *View, now time.Time) sched.Decision {
	return sched.PlanOn(v.Index, v.State, now)
}

// Prepare labels the shape pools (R1) from what an operator knows before
// the run, never from the workload's future: the inference pool sized to
// the deployments' declared max_replicas × replica GPUs (R1's own rule),
// the small pool at the operator's setting (Workload.SmallPoolNodes), R4's
// swap pool on fleets of 32+ nodes, the rest training.
func (berthPolicy) Prepare(w *Workload) ([]model.Node, sched.Config, string) {
	nodes := append([]model.Node(nil), w.Nodes...)
	if len(nodes) == 0 {
		return nodes, sched.Config{}, ""
	}
	if sharing := (&sched.Pools{}).SharingPool(); nodes[0].Pool == sharing {
		// The workload shares every node (openb's cluster does): shape
		// pools would take the nodes out of the sharing pool.
		return nodes, sched.Config{}, "berth ran without shape pools: every node is in the sharing pool, as the workload's cluster shares every node"
	}
	for _, n := range nodes {
		if n.Model != nodes[0].Model || n.GPUs != nodes[0].GPUs {
			// Pools sized by count cannot follow GPU models; an operator
			// would size one set per model. Left to them.
			return nodes, sched.Config{}, "berth ran without shape pools: the fleet mixes GPU models or node sizes, and pools are sized per model by an operator"
		}
	}
	cfg := sched.Config{Pools: sched.DefaultPools()}
	if len(nodes) < minSwapFleet {
		cfg.Pools.Swap = "" // one node of a handful is too dear a hole
	}
	labels, _ := sched.SizePools(nodes, declared(w), cfg.Pools, w.SmallPoolNodes)
	for i := range nodes {
		nodes[i].Pool = labels[nodes[i].ID]
	}
	return nodes, cfg, ""
}

// declared is the services as deployments: what their owners declared
// (shape, min and max replicas), which is configuration, not demand.
func declared(w *Workload) []model.Deployment {
	deps := make([]model.Deployment, 0, len(w.Services))
	for _, s := range w.Services {
		deps = append(deps, model.Deployment{ID: s.ID, ReplicaShape: s.Shape, MinReplicas: s.Min, MaxReplicas: s.Max})
	}
	return deps
}

// minSwapFleet is the smallest fleet given a swap pool (R4 sizes it at 1%
// of nodes, at least one: for 128 nodes, one or two).
const minSwapFleet = 32
