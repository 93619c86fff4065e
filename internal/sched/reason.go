package sched

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berthsched/berth/internal/model"
)

// ReasonCode separates what waiting can fix from what it cannot, like the
// Kubernetes scheduler's Status codes.
type ReasonCode string

const (
	// ReasonUnschedulable: does not fit now; releases, preemption or
	// defragmentation may help.
	ReasonUnschedulable ReasonCode = "unschedulable"
	// ReasonInfeasible: cannot fit on this cluster at all, even empty.
	ReasonInfeasible ReasonCode = "infeasible"
)

// Reason says why a request is not placed, in words a person can act on,
// with the constraint that failed and the best set that was available.
type Reason struct {
	Code ReasonCode `json:"code"`
	// Constraint is the field that failed: topology, models, pool,
	// cpu_milli or memory_mib.
	Constraint string `json:"constraint"`
	Message    string `json:"message"`
	// BestGPUs is the largest set available under the constraint, BestAt
	// the node or pod holding it.
	BestGPUs int    `json:"best_gpus"`
	BestAt   string `json:"best_at,omitempty"`
}

func (r *Reason) Error() string { return r.Message }

// plus is a copy of r with more said: the constraint, when given,
// replaced, and suffix added to the message. r itself may be shared by
// many pending entries and is left as it is.
func (r *Reason) plus(constraint, suffix string) *Reason {
	c := *r
	if constraint != "" {
		c.Constraint = constraint
	}
	c.Message += suffix
	return &c
}

// explain builds the reason a request found no placement.
func (ix *Index) explain(req *model.Request, routes []route, pools Pools) *Reason {
	k := req.GPUs
	var groups []*group
	for _, r := range routes {
		groups = append(groups, ix.groupsFor(r, req, pools.Swap)...)
	}
	where := ix.where(req, routes)
	if len(groups) == 0 {
		return ix.explainNoGroup(req, routes, pools)
	}
	// Could it ever fit, on this cluster emptied out?
	var maxSize, maxPod, total int
	var maxCPU, maxMem int64
	for _, g := range groups {
		maxSize = max(maxSize, g.size)
		total += g.capacity
		for _, p := range g.pods {
			maxPod = max(maxPod, p.gpus)
		}
		if g.size >= k {
			maxCPU, maxMem = max(maxCPU, g.maxCPU), max(maxMem, g.maxMem)
		}
	}
	switch req.Topology {
	case model.TopologyNode:
		if maxSize < k {
			return &Reason{Code: ReasonInfeasible, Constraint: "topology", BestGPUs: maxSize,
				Message: fmt.Sprintf("needs %d GPUs in one node; the largest node%s has %d", k, where, maxSize)}
		}
		if maxCPU < req.CPUMilli {
			return &Reason{Code: ReasonInfeasible, Constraint: "cpu_milli", BestGPUs: maxSize,
				Message: fmt.Sprintf("needs %d cpu_milli beside %d GPUs in one node; the largest node%s has %d", req.CPUMilli, k, where, maxCPU)}
		}
		if maxMem < req.MemoryMiB {
			return &Reason{Code: ReasonInfeasible, Constraint: "memory_mib", BestGPUs: maxSize,
				Message: fmt.Sprintf("needs %d memory_mib beside %d GPUs in one node; the largest node%s has %d", req.MemoryMiB, k, where, maxMem)}
		}
	case model.TopologyPod:
		if maxPod < k {
			return &Reason{Code: ReasonInfeasible, Constraint: "topology", BestGPUs: maxPod,
				Message: fmt.Sprintf("needs %d GPUs in one pod; the largest pod%s has %d", k, where, maxPod)}
		}
	default:
		if total < k {
			return &Reason{Code: ReasonInfeasible, Constraint: "gpus", BestGPUs: total,
				Message: fmt.Sprintf("needs %d GPUs; the cluster%s has %d", k, where, total)}
		}
	}
	if req.Topology != model.TopologyNode {
		if why := spreadInfeasible(req, groups, where); why != nil {
			return why
		}
	}
	// It could: say what is free now.
	bestN, bestNode, bestP, bestPod, bestA := 0, -1, 0, "", 0
	for _, g := range groups {
		if n, i := ix.largestNode(g); n > bestN {
			bestN, bestNode = n, i
		}
		if p, pi := largestPod(g); p > bestP {
			bestP, bestPod = p, g.pods[pi].name
		}
		bestA = max(bestA, placeable(g.free, g.empties, g.size))
	}
	r := &Reason{Code: ReasonUnschedulable, Constraint: "topology"}
	switch req.Topology {
	case model.TopologyNode:
		r.BestGPUs = bestN
		if bestNode >= 0 {
			r.BestAt = ix.nodes[bestNode].node.ID
		}
		if bestN >= k {
			r.Constraint = "cpu_milli"
			if ns := &ix.nodes[bestNode]; ns.cpu >= req.CPUMilli {
				r.Constraint = "memory_mib"
			}
			r.Message = fmt.Sprintf("needs %d GPUs with %d cpu_milli and %d memory_mib in one node; nodes%s with %d free GPUs (such as %s) lack the %s",
				k, req.CPUMilli, req.MemoryMiB, where, bestN, r.BestAt, r.Constraint)
			return r
		}
		r.Message = fmt.Sprintf("needs %d GPUs in one node%s; largest free node set is %d", k, where, bestN)
		if r.BestAt != "" {
			r.Message += " (" + r.BestAt + ")"
		}
	case model.TopologyPod:
		r.BestGPUs, r.BestAt = bestP, bestPod
		r.Message = fmt.Sprintf("needs %d GPUs in one pod%s; largest placeable set in a pod is %d", k, where, bestP)
		if bestPod != "" {
			r.Message += " (" + bestPod + ")"
		}
	default:
		r.BestGPUs = bestA
		r.Message = fmt.Sprintf("needs %d GPUs%s; largest placeable set anywhere is %d", k, where, bestA)
	}
	if r.BestGPUs >= k {
		// GPUs are there; cpu, memory or the whole-node rule are not.
		r.Constraint = lacking(req, groups)
		r.Message = fmt.Sprintf("needs %d GPUs (%s) with %d cpu_milli and %d memory_mib%s; enough GPUs are free but not with that cpu and memory beside them",
			k, req.Topology, req.CPUMilli, req.MemoryMiB, where)
	}
	return r
}

// spreadInfeasible is the cpu and memory test for a shape that may span
// nodes: each node carries the cpu and memory of the GPUs it gives
// (share), so a node gives at most as many GPUs as its cpu and memory
// carry. Summed over the cluster (or the best pod), emptied out and with
// every node as large as its group's largest, fewer than the shape's
// GPUs means it can never be placed.
func spreadInfeasible(req *model.Request, groups []*group, where string) *Reason {
	k := req.GPUs
	usable := func(g *group, total, limit int64) int {
		n := g.size
		for n > 0 && share(total, n, k) > limit {
			n--
		}
		return n
	}
	var byCPU, byMem, bestCPU, bestMem int
	for _, g := range groups {
		uc, um := usable(g, req.CPUMilli, g.maxCPU), usable(g, req.MemoryMiB, g.maxMem)
		if req.Topology == model.TopologyPod {
			for _, p := range g.pods {
				nodes := p.gpus / max(g.size, 1)
				bestCPU, bestMem = max(bestCPU, nodes*uc), max(bestMem, nodes*um)
			}
			continue
		}
		nodes := g.capacity / max(g.size, 1)
		byCPU += nodes * uc
		byMem += nodes * um
	}
	scope := "the cluster"
	if req.Topology == model.TopologyPod {
		byCPU, byMem, scope = bestCPU, bestMem, "the largest pod"
	}
	switch {
	case byCPU < k:
		return &Reason{Code: ReasonInfeasible, Constraint: "cpu_milli", BestGPUs: byCPU,
			Message: fmt.Sprintf("needs %d cpu_milli beside %d GPUs (%s); %s%s can carry that cpu beside only %d of them", req.CPUMilli, k, req.Topology, scope, where, byCPU)}
	case byMem < k:
		return &Reason{Code: ReasonInfeasible, Constraint: "memory_mib", BestGPUs: byMem,
			Message: fmt.Sprintf("needs %d memory_mib beside %d GPUs (%s); %s%s can carry that memory beside only %d of them", req.MemoryMiB, k, req.Topology, scope, where, byMem)}
	}
	return nil
}

// lacking names which of cpu and memory a shape asks more of, as a share
// of what the largest nodes hold: the one a reason should name when
// enough GPUs are free but not with their cpu and memory.
func lacking(req *model.Request, groups []*group) string {
	var cpu, mem float64
	for _, g := range groups {
		if g.maxCPU > 0 {
			cpu = max(cpu, float64(req.CPUMilli)/float64(g.maxCPU))
		}
		if g.maxMem > 0 {
			mem = max(mem, float64(req.MemoryMiB)/float64(g.maxMem))
		}
	}
	if mem > cpu {
		return "memory_mib"
	}
	return "cpu_milli"
}

// where names the pools and models a reason speaks of.
func (ix *Index) where(req *model.Request, routes []route) string {
	var s string
	if len(req.Models) > 0 {
		s += " of model " + strings.Join(req.Models, " or ")
	}
	var pools []string
	for _, r := range routes {
		if r.any {
			// Every pool: naming the one tried after would mislead.
			pools = nil
			break
		}
		pools = append(pools, r.pool)
	}
	if len(pools) > 0 {
		s += " in pool " + strings.Join(pools, " or ")
	}
	return s
}

func (ix *Index) explainNoGroup(req *model.Request, routes []route, pools Pools) *Reason {
	models := map[string]bool{}
	accepted := false
	for _, g := range ix.groups {
		models[g.model] = true
		if req.AcceptsModel(g.model) {
			accepted = true
		}
	}
	if !accepted {
		names := make([]string, 0, len(models))
		for m := range models {
			names = append(names, m)
		}
		sort.Strings(names)
		return &Reason{Code: ReasonInfeasible, Constraint: "models",
			Message: fmt.Sprintf("needs GPU model %s; no node has it (models here: %s)", strings.Join(req.Models, " or "), strings.Join(names, ", "))}
	}
	return &Reason{Code: ReasonInfeasible, Constraint: "pool",
		Message: fmt.Sprintf("needs %d GPUs%s; no node there has an acceptable GPU model", req.GPUs, ix.where(req, routes))}
}
