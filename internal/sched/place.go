package sched

import (
	"sort"

	"github.com/berthsched/berth/internal/model"
)

// Part is the piece of a placement on one node.
type Part struct {
	Node     string        `json:"node"`
	GPUs     model.GPUMask `json:"gpu_mask"`
	GPUMilli int           `json:"gpu_milli,omitempty"` // a share of its one GPU
	// MIGInstance is the MIG instance the share takes (from 1), on a
	// partitioned GPU.
	MIGInstance int   `json:"mig_instance,omitempty"`
	CPUMilli    int64 `json:"cpu_milli"`
	MemoryMiB   int64 `json:"memory_mib"`
}

// Placement is where a request goes: one part per node.
type Placement struct {
	Pool     string `json:"pool,omitempty"`
	Borrowed bool   `json:"borrowed,omitempty"`
	Parts    []Part `json:"parts"`
}

// GPUs is the placement's GPU count.
func (p *Placement) GPUs() int {
	n := 0
	for _, pt := range p.Parts {
		n += pt.GPUs.Count()
	}
	return n
}

// share is the part of a shape-wide total that n of its k GPUs carry.
func share(total int64, n, k int) int64 { return model.Share(total, n, k) }

// placeOpts narrow where a request may go.
type placeOpts struct {
	exclude map[int]bool // nodes to leave alone (being emptied)
	// partialOnly keeps the request off untouched nodes, except in the swap
	// pool: a relocation that lands on an empty node moves the hole instead
	// of closing it.
	partialOnly bool
	routes      []route      // overrides the pools' routing
	only        map[int]bool // when set, the only nodes that may be used
}

// placer carries one request through the index.
type placer struct {
	ix    *Index
	req   *model.Request
	opts  placeOpts
	fit   fitFunc
	parts []Part
}

// Place finds the request a placement under its topology and pools, takes
// it in the index, and returns it. When nothing fits it changes nothing and
// returns the reason.
func (ix *Index) Place(req *model.Request, pools Pools) (Placement, *Reason) {
	return ix.place(req, pools, placeOpts{})
}

func (ix *Index) place(req *model.Request, pools Pools, opts placeOpts) (Placement, *Reason) {
	if req.Fraction() {
		return ix.placeShared(req, pools, opts)
	}
	pl := ix.newPlacer(req, pools, opts)
	routes := opts.routes
	if routes == nil {
		routes = pools.routes(req)
	}
	others := false // the any route reached nodes outside the pool it skips
	for _, r := range routes {
		if others && r.pool != "" && r.pool == routes[0].skip {
			// The sharing pool is where shares fit: whole-GPU work goes
			// there only on a fleet with no other nodes for it.
			continue
		}
		if !r.any && r.pool == pools.SharingPool() && req.Topology == model.TopologyNode {
			if pl.placeSharing(r.pool) {
				return pl.placement(r), nil
			}
			continue
		}
		groups := ix.groupsFor(r, req, pools.Swap)
		others = others || r.any && r.skip != "" && len(groups) > 0
		if pl.placeIn(groups) {
			return pl.placement(r), nil
		}
	}
	return Placement{}, ix.explain(req, routes, pools)
}

func (ix *Index) newPlacer(req *model.Request, pools Pools, opts placeOpts) *placer {
	pl := &placer{ix: ix, req: req, opts: opts}
	k := req.GPUs
	pl.fit = func(i, n int) bool {
		if opts.exclude[i] || (opts.only != nil && !opts.only[i]) {
			return false
		}
		ns := &ix.nodes[i]
		if opts.partialOnly && len(ns.shapes) == 0 && (pools.Swap == "" || ns.node.Pool != pools.Swap) {
			return false
		}
		return ns.cpu >= share(req.CPUMilli, n, k) && ns.mem >= share(req.MemoryMiB, n, k)
	}
	return pl
}

// placement wraps what the placer took, under the route it took it by.
func (pl *placer) placement(r route) Placement {
	pool := r.pool
	if r.any {
		pool = pl.ix.nodes[pl.ix.byID[pl.parts[0].Node]].node.Pool
	}
	return Placement{Pool: pool, Borrowed: r.borrowed, Parts: pl.parts}
}

func (pl *placer) placeIn(groups []*group) bool {
	if len(groups) == 0 {
		return false
	}
	switch pl.req.Topology {
	case model.TopologyNode:
		return pl.placeNode(groups)
	case model.TopologyPod:
		return pl.placePod(groups)
	}
	return pl.placeNode(groups) || pl.placePod(groups) || pl.placeSpan(groups)
}

// placeNode puts the whole request on the R1-best node across groups.
func (pl *placer) placeNode(groups []*group) bool {
	k := pl.req.GPUs
	best, bestScore := -1, nodeScore{tierNone, 0}
	for _, g := range groups {
		i, s := pl.ix.bestNode(g, k, -1, pl.fit)
		if i >= 0 && (best < 0 || s.less(bestScore) || (s == bestScore && i < best)) {
			best, bestScore = i, s
		}
	}
	if best < 0 {
		return false
	}
	pl.take(best, k)
	return true
}

// placePod tries pods tightest first (least free), across groups.
func (pl *placer) placePod(groups []*group) bool {
	k := pl.req.GPUs
	type cand struct{ g, p int }
	tried := map[cand]bool{}
	for {
		best, bestFree := cand{-1, -1}, 0
		for gi, g := range groups {
			whole := k%g.size == 0
			for pi, p := range g.pods {
				if tried[cand{gi, pi}] || (whole && p.empties < k/g.size) || (!whole && p.free < k) {
					continue
				}
				if best.g < 0 || p.free < bestFree {
					best, bestFree = cand{gi, pi}, p.free
				}
			}
		}
		if best.g < 0 {
			return false
		}
		tried[best] = true
		if pl.gang(groups[best.g], []int{best.p}, best.p) {
			return true
		}
	}
}

// placeSpan lets an `any` request cross pods: the tightest group that can
// hold it, pods with the most free GPUs first so it touches as few as it can.
func (pl *placer) placeSpan(groups []*group) bool {
	k := pl.req.GPUs
	order := make([]*group, 0, len(groups))
	for _, g := range groups {
		if (k%g.size == 0 && g.empties >= k/g.size) || (k%g.size != 0 && g.free >= k) {
			order = append(order, g)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].free < order[b].free })
	for _, g := range order {
		pods := make([]int, len(g.pods))
		for i := range pods {
			pods[i] = i
		}
		sort.SliceStable(pods, func(a, b int) bool { return g.pods[pods[a]].free > g.pods[pods[b]].free })
		if pl.gang(g, pods, -1) {
			return true
		}
	}
	return false
}

// gang places the request inside group g: whole nodes first from pods in
// the given order, then the remainder best-fit on one node if it can, else
// from the largest partial pieces, so whole nodes stay whole. A request
// whose size is a multiple of the node size takes whole nodes only. It is a
// tentative transaction: on failure everything it took is rolled back.
//
// With a worker size (Shape.Worker) every part is a multiple of it: whole
// nodes only when it divides the node, pieces only of its multiples.
func (pl *placer) gang(g *group, pods []int, podSel int) bool {
	ix, k, unit := pl.ix, pl.req.GPUs, pl.req.Unit()
	cp, n0 := ix.Checkpoint(), len(pl.parts)
	need := k
	for _, p := range pods {
		for need >= g.size && g.size%unit == 0 {
			i := ix.firstInPod(g.pods[p], g.bucketOf(g.size, 0), g.size, pl.fit)
			if i < 0 {
				break
			}
			pl.take(i, g.size)
			need -= g.size
		}
	}
	if k%g.size == 0 && need > 0 {
		need = -1 // whole nodes only, and there were not enough
	}
	for need > 0 {
		if i, _ := ix.bestNode(g, need, podSel, pl.fit); i >= 0 {
			pl.take(i, need)
			need = 0
			break
		}
		i := ix.largestPiece(g, need, podSel, unit, pl.fit)
		if i < 0 {
			break
		}
		f := ix.nodes[i].free.Count()
		f -= f % unit
		pl.take(i, f)
		need -= f
	}
	if need != 0 {
		ix.Rollback(cp)
		pl.parts = pl.parts[:n0]
		return false
	}
	return true
}

// take assigns n GPUs of node i to the request.
func (pl *placer) take(i, n int) { pl.takeFrom(i, n, pl.ix.nodes[i].free) }

// takeFrom assigns n of node i's GPUs in free to the request.
func (pl *placer) takeFrom(i, n int, free model.GPUMask) {
	ix := pl.ix
	ns := &ix.nodes[i]
	mask := chooseMask(ns.node, free, n)
	cpu, mem := share(pl.req.CPUMilli, n, pl.req.GPUs), share(pl.req.MemoryMiB, n, pl.req.GPUs)
	ix.assign(i, mask, cpu, mem)
	pl.parts = append(pl.parts, Part{Node: ns.node.ID, GPUs: mask, CPUMilli: cpu, MemoryMiB: mem})
}
