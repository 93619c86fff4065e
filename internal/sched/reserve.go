package sched

import (
	"sort"
	"strconv"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Reservation holds GPUs for work that cannot start yet (R2). It is
// re-derived every pass in rank order, so it holds across passes without a
// timeout, and a job only ever takes GPUs from reservations ranked below
// it: higher-ranked reservations are decided first and their held GPUs are
// out of the index when lower-ranked work is placed. No cycle can form in
// the wait-for graph.
type Reservation struct {
	// Owner is the job id, or the deployment id for an inference replica.
	Owner   string          `json:"owner"`
	Kind    model.OwnerKind `json:"kind"`
	Replica int             `json:"replica,omitempty"`
	Rank    int             `json:"rank"` // effective priority when decided
	// At names where it fills: a node, a pod, or pool/model.
	At string `json:"at"`
	// Held are GPUs free now and kept from lower-ranked work; backfill may
	// run on them.
	Held []Part `json:"held,omitempty"`
	// Target is where the owner goes once Waits are gone, when known.
	Target []Part `json:"target,omitempty"`
	// Waits are the allocations it waits on: preempted or stopping work,
	// or backfill running on its GPUs.
	Waits []string `json:"waits,omitempty"`
	// Backfill lists the jobs this pass started inside it (R2): they end
	// before ETA, or yield the moment it can fill.
	Backfill []string `json:"backfill,omitempty"`
	// ETA is the estimated time it fills without preemption; zero when
	// unknown (work with no max_runtime stands in the way).
	ETA       time.Time `json:"eta,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	GPUs      int       `json:"gpus"`
}

// HeldGPUs counts the reservation's held GPUs.
func (r *Reservation) HeldGPUs() int {
	n := 0
	for _, pt := range r.Held {
		n += pt.GPUs.Count()
	}
	return n
}

func resKey(owner string, replica int) string { return owner + "#" + strconv.Itoa(replica) }

// hold takes, of parts, the GPUs that are free now, and returns what it took.
func (p *planner) hold(parts []Part) []Part {
	var held []Part
	for _, pt := range parts {
		i, ok := p.ix.byID[pt.Node]
		if !ok {
			continue
		}
		if m := pt.GPUs & p.ix.nodes[i].free; m != 0 {
			p.ix.assign(i, m, 0, 0)
			held = append(held, Part{Node: pt.Node, GPUs: m})
		}
	}
	return held
}

// claim turns a room into a reservation: the target's GPUs are kept for
// the owner from now on, including those still under work that is
// stopping. Of each stopping or preempted allocation, what the target does
// not use stays in the index as "stopping", so a later request in this
// pass can count on it once it is gone, but nothing binds onto it early.
func (p *planner) claim(owner string, kind model.OwnerKind, replica, rank int, r *room) *Reservation {
	ix := p.ix
	res := &Reservation{Owner: owner, Kind: kind, Replica: replica, Rank: rank, At: r.at, Target: r.place.Parts,
		CreatedAt: p.createdAt(owner, replica), GPUs: r.place.GPUs()}
	var leaving []model.Allocation
	for _, v := range r.victims {
		leaving = append(leaving, v.allocs...)
	}
	leaving = append(leaving, r.waits...)
	gone := map[string]bool{}
	for _, a := range leaving {
		res.Waits = append(res.Waits, a.ID)
		gone[a.ID] = true
	}
	kept := p.stopping[:0:0]
	for _, a := range p.stopping {
		if !gone[a.ID] {
			kept = append(kept, a)
		}
	}
	p.stopping = kept
	// It fills when the last of what it waits on is gone: the deadlines.
	for _, v := range r.victims {
		res.ETA = later(res.ETA, p.now.Add(p.deadline(v.job)))
	}
	for _, a := range r.waits {
		res.ETA = later(res.ETA, a.StopDeadline)
	}
	res.Held = p.hold(r.place.Parts) // what is free right now
	ix.releaseAll(leaving)
	target := map[string]model.GPUMask{}
	for _, pt := range r.place.Parts {
		target[pt.Node] |= pt.GPUs
		if i, ok := ix.byID[pt.Node]; ok {
			if m := pt.GPUs & ix.nodes[i].free; m != 0 {
				ix.assign(i, m, 0, 0)
			}
		}
	}
	for _, a := range leaving {
		rest := a
		rest.GPUs = a.GPUs &^ target[a.NodeID]
		rest.Stopping = true
		if rest.GPUs != 0 && ix.Assign(rest) {
			p.stopping = append(p.stopping, rest)
		}
	}
	p.reservations = append(p.reservations, res)
	return res
}

func (p *planner) createdAt(owner string, replica int) time.Time {
	if prev, ok := p.prevRes[repKey{owner, replica}]; ok && !prev.CreatedAt.IsZero() {
		return prev.CreatedAt
	}
	return p.now
}

// holdFree keeps the free GPUs of the best unit for a job that cannot fill
// even with preemption, so lower-ranked work stops nibbling at them while
// they accumulate (R2: "take what is free now"). It prefers the unit the
// job held before, then the one with the most free GPUs.
func (p *planner) holdFree(id string, r *model.Request, key shapeID, rnk int) *Reservation {
	if c, ok := p.noHold[key]; ok && c == p.ix.changes {
		return nil // nothing to hold for this shape, and nothing changed
	}
	req := *r
	prev, hadRes := p.prevRes[repKey{id, 0}]
	u, name, free := p.bestUnit(&req, prev.At)
	if free == 0 {
		if !hadRes {
			p.noHold[key] = p.ix.changes
		}
		return nil
	}
	k := req.GPUs
	var parts []Part
	switch {
	case u.node >= 0:
		ns := &p.ix.nodes[u.node]
		parts = []Part{{Node: ns.node.ID, GPUs: ns.free}}
	case k%u.g.size == 0:
		// A whole-node gang can only use whole nodes.
		for _, pod := range p.unitPods(u) {
			for _, i := range u.g.pods[pod].nodes {
				if ns := &p.ix.nodes[i]; ns.eligible && ns.whole() && len(parts)*u.g.size < k {
					parts = append(parts, Part{Node: ns.node.ID, GPUs: ns.free})
				}
			}
		}
	default:
		sub := req
		sub.GPUs = min(k, free)
		cp := p.ix.Checkpoint()
		if pl, ok := p.ix.placeUnit(u, &sub, p.cfg.Pools, placeOpts{}); ok {
			parts = pl.Parts
		}
		p.ix.Rollback(cp)
	}
	held := p.hold(parts)
	if len(held) == 0 {
		return nil
	}
	res := &Reservation{Owner: id, Kind: model.OwnerTraining, Rank: rnk, At: name, Held: held,
		CreatedAt: p.createdAt(id, 0), GPUs: k}
	res.ETA = p.eta(u, k-res.HeldGPUs())
	p.reservations = append(p.reservations, res)
	return res
}

func (p *planner) unitPods(u unit) []int {
	if u.pod >= 0 {
		return []int{u.pod}
	}
	out := make([]int, len(u.g.pods))
	for i := range out {
		out[i] = i
	}
	return out
}

// bestUnit is the unit with the most free GPUs that could ever host req.
func (p *planner) bestUnit(req *model.Request, prefer string) (unit, string, int) {
	ix, k := p.ix, req.GPUs
	var best unit
	bestName, bestFree, found := "", 0, false
	consider := func(u unit, name string, free, capacity int) {
		if capacity < k || free == 0 {
			return
		}
		preferred := prefer != "" && name == prefer
		if !found || (preferred && bestName != prefer) || (bestName != prefer && free > bestFree) {
			best, bestName, bestFree, found = u, name, free, true
		}
	}
	for _, r := range p.cfg.Pools.routes(req) {
		for _, g := range ix.groupsFor(r, req, p.cfg.Pools.Swap) {
			switch req.Topology {
			case model.TopologyNode:
				if f, i := ix.largestNode(g); i >= 0 {
					consider(unit{g: g, pod: -1, node: i}, ix.nodes[i].node.ID, f, g.size)
				}
				if i, ok := ix.byID[prefer]; ok && ix.groups[ix.nodes[i].group] == g {
					consider(unit{g: g, pod: -1, node: i}, prefer, ix.nodes[i].free.Count(), g.size)
				}
			case model.TopologyPod:
				for pi, pod := range g.pods {
					consider(unit{g: g, pod: pi, node: -1}, pod.name, pod.free, pod.gpus)
				}
			default:
				consider(unit{g: g, pod: -1, node: -1}, g.pool+"/"+g.model, g.free, g.capacity)
			}
		}
	}
	return best, bestName, bestFree
}

// eta estimates when a unit frees need more GPUs without preemption: the
// expected ends (start + max_runtime, or the stop deadline) of the work in
// it, soonest first. Zero when work with no known end stands in the way.
func (p *planner) eta(u unit, need int) time.Time {
	if need <= 0 {
		return p.now
	}
	type end struct {
		at   time.Time
		gpus int
	}
	var ends []end
	for _, k := range p.allocsIn(u) {
		a := &p.s.Allocations[k]
		at := time.Time{}
		switch {
		case a.Stopping:
			at = a.StopDeadline
		case a.OwnerKind != model.OwnerInference:
			if j := p.owners[k]; j != nil && j.MaxRuntime > 0 {
				start := j.StartedAt
				if start.IsZero() {
					start = a.CreatedAt
				}
				at = start.Add(j.MaxRuntime)
			}
		}
		if at.IsZero() {
			continue
		}
		ends = append(ends, end{at, a.GPUs.Count()})
	}
	sort.Slice(ends, func(a, b int) bool { return ends[a].at.Before(ends[b].at) })
	for _, e := range ends {
		if need -= e.gpus; need <= 0 {
			if e.at.Before(p.now) {
				return p.now
			}
			return e.at
		}
	}
	return time.Time{}
}

// allocsIn lists (as positions in State.Allocations) the allocations on a
// unit's nodes, from a per-node list built once per pass on first use.
func (p *planner) allocsIn(u unit) []int {
	if p.byNode == nil {
		p.byNode = make([][]int, len(p.ix.nodes))
		for k, a := range p.s.Allocations {
			if i, ok := p.ix.byID[a.NodeID]; ok {
				p.byNode[i] = append(p.byNode[i], k)
			}
		}
	}
	var nodes []int
	switch {
	case u.node >= 0:
		nodes = []int{u.node}
	case u.pod >= 0:
		nodes = u.g.pods[u.pod].nodes
	default:
		for _, pod := range u.g.pods {
			nodes = append(nodes, pod.nodes...)
		}
	}
	var out []int
	for _, i := range nodes {
		out = append(out, p.byNode[i]...)
	}
	return out
}

// mayBackfill: only a preemptible job with a declared runtime backfills,
// and only until it is first preempted: backfill yields the moment its
// reservation can fill, and repeat preemption of one job is negative
// progress (§7's thrash guard).
func mayBackfill(j *model.Job) bool {
	return j.MaxRuntime > 0 && j.Preemptible && j.PreemptCount == 0
}

// backfill tries to run j on GPUs a reservation holds but cannot use yet
// (R2): only when j's max_runtime ends before the reservation's estimated
// fill, and only on one held node (a backfill spanning nodes would tie
// several reservations' fates together). It looks at held nodes only, so
// its cost follows the holds, not the fleet. It returns the bind, or false.
func (p *planner) backfill(j *model.Job) (Bind, bool) {
	if !mayBackfill(j) || len(p.reservations) == 0 {
		return Bind{}, false
	}
	req := j.Request()
	key := shapeKey(&req)
	if c, ok := p.noBackfill[key]; ok && c.changes == p.ix.changes && j.MaxRuntime >= c.maxRuntime {
		return Bind{}, false // a job as long found no room, and nothing changed
	}
	end := p.now.Add(j.MaxRuntime)
	k := req.GPUs
	for _, res := range p.reservations {
		if res.Kind != model.OwnerTraining || res.HeldGPUs() < k || (!res.ETA.IsZero() && !end.Before(res.ETA)) {
			continue
		}

		// The held node that fits tightest once its hold is lifted.
		best, bestFree := -1, 0
		for h, pt := range res.Held {
			i := p.ix.byID[pt.Node]
			ns := &p.ix.nodes[i]
			free := (ns.free | pt.GPUs).Count()
			if pt.GPUs.Count() == 0 || free < k || !req.AcceptsModel(ns.node.Model) ||
				ns.cpu < req.CPUMilli || ns.mem < req.MemoryMiB || (best >= 0 && free >= bestFree) {
				continue
			}
			best, bestFree = h, free
		}
		if best < 0 {
			continue
		}
		pt := res.Held[best]
		i := p.ix.byID[pt.Node]
		p.ix.release(i, pt.GPUs, 0, 0)
		ns := &p.ix.nodes[i]
		mask := chooseMask(ns.node, ns.free, k)
		p.ix.assign(i, mask, req.CPUMilli, req.MemoryMiB)
		rest := pt.GPUs &^ mask
		res.Held = append(res.Held[:best:best], res.Held[best+1:]...)
		if held := p.hold([]Part{{Node: pt.Node, GPUs: rest}}); len(held) > 0 {
			res.Held = append(res.Held, held...)
		}
		res.Backfill = append(res.Backfill, j.ID)
		pl := Placement{Pool: ns.node.Pool, Parts: []Part{{Node: pt.Node, GPUs: mask, CPUMilli: req.CPUMilli, MemoryMiB: req.MemoryMiB}}}
		return Bind{Kind: model.OwnerBackfill, OwnerID: j.ID, Preemptible: true, Reservation: res.Owner, Placement: pl}, true
	}
	p.noBackfill[key] = noBackfill{p.ix.changes, j.MaxRuntime}
	return Bind{}, false
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
