package sim

import (
	"fmt"
	"math"
	"sort"
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

// NewPolicy returns the named policy; random ones draw from seed.
func NewPolicy(name string, seed uint64) (Policy, error) {
	switch name {
	case "berth":
		return berthPolicy{}, nil
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
	return nil, fmt.Errorf("policy: %q is not one of %s", name, strings.Join(PolicyNames, ", "))
}

// berthPolicy is the scheduling core, exactly as the server runs it.
type berthPolicy struct{}

func (berthPolicy) Name() string { return "berth" }

func (berthPolicy) Plan(v *View, now time.Time) sched.Decision {
	return sched.PlanOn(v.Index, v.State, now)
}

// Prepare labels the shape pools (R1): an inference pool for the peak of
// replicas of 4+ GPUs, a small pool for the concurrent demand of ≤4-GPU
// work with half again as headroom, R4's swap pool, the rest training.
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
	big, small := peakInference(w, cfg.Pools.InferenceMinGPUs)
	horizon := w.span().Hours()
	if horizon > 0 {
		w.eachJob(func(j *JobSpec) {
			if j.Shape.GPUs <= cfg.Pools.SmallMaxGPUs {
				small += float64(j.Shape.GPUs) * j.Work.Hours() / horizon
			}
		})
	}
	per := float64(nodes[0].GPUs)
	smallNodes := int(math.Ceil(small * 1.5 / per))
	deps := []model.Deployment{{ID: "peak", ReplicaShape: model.Shape{GPUs: int(per), Topology: model.TopologyNode},
		MaxReplicas: int(math.Ceil(big / per))}}
	labels, _ := sched.SizePools(nodes, deps, cfg.Pools, smallNodes)
	for i := range nodes {
		nodes[i].Pool = labels[nodes[i].ID]
	}
	return nodes, cfg, ""
}

// minSwapFleet is the smallest fleet given a swap pool (R4 sizes it at 1%
// of nodes, at least one: for 128 nodes, one or two).
const minSwapFleet = 32

// peakInference is the most GPUs the services want at once: of replicas
// with at least minGPUs, and (as a mean over the run) of smaller ones.
func peakInference(w *Workload, minGPUs int) (big, smallMean float64) {
	type change struct {
		at    time.Duration
		delta float64
	}
	var changes []change
	for _, s := range w.Services {
		g := float64(s.Shape.GPUs)
		prev := 0.0
		for i, d := range s.Demand {
			r := float64(min(max(d.Replicas, s.Min), s.Max))
			if s.Shape.GPUs >= minGPUs {
				changes = append(changes, change{d.At, (r - prev) * g})
				prev = r
				continue
			}
			until := w.span()
			if i+1 < len(s.Demand) {
				until = s.Demand[i+1].At
			}
			if span := w.span(); span > 0 {
				smallMean += r * g * (until - d.At).Hours() / span.Hours()
			}
		}
	}
	sort.SliceStable(changes, func(a, b int) bool { return changes[a].at < changes[b].at })
	cur := 0.0
	for _, c := range changes {
		cur += c.delta
		big = max(big, cur)
	}
	return big, smallMean
}
