package sched

import (
	"sort"

	"github.com/berthsched/berth/internal/model"
)

// The naive reference: the same placement rules as the index, written as
// the plainest possible linear scans over nodes. The property tests hold the
// indexed fast path to it, and the benchmarks report it beside the fast
// path so the ratio is visible. It shares no code with the index.

type refNode struct {
	n        *model.Node
	free     model.GPUMask
	cpu, mem int64
	shapes   map[int]int
}

type refFleet struct {
	nodes []refNode
	cfg   Config
}

func newRef(nodes []model.Node, allocs []model.Allocation, cfg Config) *refFleet {
	r := &refFleet{cfg: cfg.withDefaults()}
	for i := range nodes {
		n := &nodes[i]
		r.nodes = append(r.nodes, refNode{n: n, free: model.FullMask(n.GPUs) &^ n.QuarantinedGPUs, cpu: n.CPUMilli, mem: n.MemoryMiB, shapes: map[int]int{}})
	}
	sort.Slice(r.nodes, func(a, b int) bool {
		x, y := r.nodes[a].n, r.nodes[b].n
		if x.Pod != y.Pod {
			return x.Pod < y.Pod
		}
		return x.ID < y.ID
	})
	for _, a := range allocs {
		for i := range r.nodes {
			if rn := &r.nodes[i]; rn.n.ID == a.NodeID {
				rn.free &^= a.GPUs
				rn.cpu -= a.CPUMilli
				rn.mem -= a.MemoryMiB
				rn.shapes[a.GPUs.Count()]++
			}
		}
	}
	return r
}

// poolChoices lists, in order of preference, the pools req may use; nil
// stands for "every pool but swap" when no pools are configured.
func (r *refFleet) poolChoices(req *model.Request) []*string {
	p := r.cfg.Pools
	if !p.configured() {
		return []*string{nil}
	}
	var out []*string
	for _, rt := range p.routes(req) {
		out = append(out, &rt.pool)
	}
	return out
}

// usable reports whether a node may take part of req under one pool choice.
func (r *refFleet) usable(rn *refNode, req *model.Request, pool *string) bool {
	if !rn.n.Schedulable() || !req.AcceptsModel(rn.n.Model) {
		return false
	}
	if pool == nil {
		return r.cfg.Pools.Swap == "" || rn.n.Pool != r.cfg.Pools.Swap
	}
	return rn.n.Pool == *pool
}

func (rn *refNode) affinity() int {
	nonzero := 0
	shape := 0
	for s, c := range rn.shapes {
		if c > 0 {
			nonzero++
			shape = s
		}
	}
	switch nonzero {
	case 0:
		return 0
	case 1:
		return shape
	}
	return -1
}

// score is R1 as written in search.go's comment, computed from scratch.
func (rn *refNode) score(k int) nodeScore {
	f := rn.free.Count()
	a := rn.affinity()
	switch {
	case f == k:
		return nodeScore{tierExact, 0}
	case a == k:
		return nodeScore{tierAligned, f - k}
	case a == 0:
		return nodeScore{tierEmpty, f - k}
	}
	return nodeScore{tierPartial, f - k}
}

// bestNode is the naive `node` placement: scan every node, keep the best,
// pool by pool in order of preference.
func (r *refFleet) bestNode(req *model.Request) (int, nodeScore) {
	for _, pool := range r.poolChoices(req) {
		if i, s := r.bestNodeIn(req, pool); i >= 0 {
			return i, s
		}
	}
	return -1, nodeScore{tierNone, 0}
}

func (r *refFleet) bestNodeIn(req *model.Request, pool *string) (int, nodeScore) {
	best, bestScore := -1, nodeScore{tierNone, 0}
	for i := range r.nodes {
		rn := &r.nodes[i]
		if !r.usable(rn, req, pool) || rn.free.Count() < req.GPUs || rn.cpu < req.CPUMilli || rn.mem < req.MemoryMiB {
			continue
		}
		if s := rn.score(req.GPUs); best < 0 || s.less(bestScore) {
			best, bestScore = i, s
		}
	}
	return best, bestScore
}

type refGroupKey struct {
	pool, model string
	size        int
}

// sets groups usable nodes' free counts by (group, pod) and by group.
func (r *refFleet) sets(req *model.Request) (byPod map[refGroupKey]map[string][]int, byGroup map[refGroupKey][]int) {
	byPod, byGroup = map[refGroupKey]map[string][]int{}, map[refGroupKey][]int{}
	for i := range r.nodes {
		rn := &r.nodes[i]
		usable := false
		for _, pool := range r.poolChoices(req) {
			usable = usable || r.usable(rn, req, pool)
		}
		if !usable {
			continue
		}
		k := refGroupKey{rn.n.Pool, rn.n.Model, rn.n.GPUs}
		if byPod[k] == nil {
			byPod[k] = map[string][]int{}
		}
		f := rn.free.Count()
		if f == rn.n.GPUs && rn.affinity() == 0 {
			f = -f // whole node
		}
		byPod[k][rn.n.Pod] = append(byPod[k][rn.n.Pod], f)
		byGroup[k] = append(byGroup[k], f)
	}
	return byPod, byGroup
}

// gangFits says whether a set of nodes (free counts, negative for whole
// nodes) can take k GPUs as a gang of node size g.
func gangFits(frees []int, k, g int) bool {
	whole, total := 0, 0
	for _, f := range frees {
		if f < 0 {
			whole++
			total -= f
		} else {
			total += f
		}
	}
	if k%g == 0 {
		return whole >= k/g
	}
	return total >= k
}

// feasible is the naive answer to "can req be placed now" for requests
// with no cpu or memory (where GPU counts alone decide).
func (r *refFleet) feasible(req *model.Request) bool {
	if i, _ := r.bestNode(req); i >= 0 && req.Topology != model.TopologyPod {
		return true
	}
	if req.Topology == model.TopologyNode {
		return false
	}
	byPod, byGroup := r.sets(req)
	for k, pods := range byPod {
		for _, frees := range pods {
			if gangFits(frees, req.GPUs, k.size) {
				return true
			}
		}
		if req.Topology == model.TopologyAny && gangFits(byGroup[k], req.GPUs, k.size) {
			return true
		}
	}
	return false
}

// largest is largest_placeable by brute force: the biggest k each topology
// accepts, trying every k.
func (r *refFleet) largest() Largest {
	var l Largest
	total := 0
	for i := range r.nodes {
		total += r.nodes[i].n.GPUs
	}
	probe := func(t model.Topology) int {
		for k := total; k >= 1; k-- {
			req := model.Request{Shape: model.Shape{GPUs: k, Topology: t}, Kind: model.OwnerTraining}
			if r.cfg.Pools.configured() {
				return 0 // the headline ignores routing; only checked unpooled
			}
			if r.feasible(&req) {
				return k
			}
		}
		return 0
	}
	l.Node, l.Pod, l.Any = probe(model.TopologyNode), probe(model.TopologyPod), probe(model.TopologyAny)
	return l
}

func sortStrings(s []string) { sort.Strings(s) }
