package sched

import (
	"cmp"
	"slices"
	"sort"

	"github.com/berthsched/berth/internal/model"
)

// room is what making room for a request found: the unit it goes to, the
// victims to preempt now, the allocations already stopping it waits for,
// and where it will go once they are gone.
type room struct {
	unit    unit
	at      string // the unit's name: node, pod, or pool/model
	victims []*victim
	waits   []model.Allocation
	place   Placement
}

// maxUnitsTried bounds the units one request's preemption search tries.
const maxUnitsTried = 4

type unitCand struct {
	u        unit
	name     string
	free     int
	stopping []model.Allocation
	victims  []*victim
	vgpus    int
}

// makeRoom finds the cheapest place where req fits once victims go, and
// the smallest set of victims that gets it there (no victim whose release
// the request does not need: the failure Kueue and Volcano are known for).
// eligible filters victims for this beneficiary; prefer names a unit to
// try first (the reservation's, so that a search does not wander between
// passes). It leaves the index as it found it, and returns nil when no
// preemption helps.
func (p *planner) makeRoom(req *model.Request, eligible func(*victim) bool, prefer string) *room {
	if p.roomImpossible(req) {
		return nil
	}
	cands := p.unitCands(req, eligible)
	// The reservation's own unit first; then units whose victims come
	// earliest in the preemption order (so §7's order decides who yields,
	// not where), then the least to free.
	first := func(c *unitCand) int {
		if len(c.victims) == 0 {
			return -1 // only waiting on what is already stopping: free
		}
		return c.victims[0].pos
	}
	slices.SortStableFunc(cands, func(x, y unitCand) int {
		if (x.name == prefer) != (y.name == prefer) {
			if x.name == prefer {
				return -1
			}
			return 1
		}
		if fx, fy := first(&x), first(&y); fx != fy {
			return cmp.Compare(fx, fy)
		}
		nx, ny := req.GPUs-x.free-gpusOf(x.stopping), req.GPUs-y.free-gpusOf(y.stopping)
		if nx != ny {
			return cmp.Compare(nx, ny)
		}
		return cmp.Compare(x.vgpus, y.vgpus)
	})
	for t := 0; t < len(cands) && t < maxUnitsTried; t++ {
		if r := p.roomIn(&cands[t], req); r != nil {
			return r
		}
	}
	return nil
}

// unitCands lists the units whose free, stopping and victim GPUs could add
// up to the request, with their victims in preemption order. Units live in
// a flat slot array (node, group pod or group), not a map: this walks every
// candidate victim and runs once per search.
func (p *planner) unitCands(req *model.Request, eligible func(*victim) bool) []unitCand {
	ix, k := p.ix, req.GPUs
	var groups []*group
	for _, r := range p.cfg.Pools.routes(req) {
		for _, g := range ix.groupsFor(r, req, p.cfg.Pools.Swap) {
			if req.Topology != model.TopologyNode || g.size >= k {
				groups = append(groups, g)
			}
		}
	}
	if len(groups) == 0 {
		return nil
	}
	gi := make([]int, len(ix.groups)) // index group → position in groups, or -1
	for i := range gi {
		gi[i] = -1
	}
	podBase := make([]int, len(groups)) // first slot of each group's pods
	nslots := 0
	for i, g := range groups {
		gi[g.idx] = i
		podBase[i] = nslots
		nslots += len(g.pods)
	}
	switch req.Topology {
	case model.TopologyNode:
		nslots = len(ix.nodes)
	case model.TopologyAny:
		nslots = len(groups)
	}
	slotOf := func(node int) int {
		l := ix.loc[node] // compact: this runs for every victim's every node
		g := gi[l.group]
		if g < 0 || !l.eligible {
			return -1
		}
		switch req.Topology {
		case model.TopologyNode:
			return node
		case model.TopologyPod:
			return podBase[g] + int(l.pod)
		}
		return g
	}
	slots := make([]*unitCand, nslots)
	var used []int
	get := func(slot, node int) *unitCand {
		if c := slots[slot]; c != nil {
			return c
		}
		ns := &ix.nodes[node]
		g := ix.groups[ns.group]
		c := &unitCand{u: unit{g: g, pod: -1, node: -1}}
		switch req.Topology {
		case model.TopologyNode:
			c.u.node, c.name, c.free = node, ns.node.ID, ns.free.Count()
		case model.TopologyPod:
			c.u.pod, c.name, c.free = ns.pod, g.pods[ns.pod].name, g.pods[ns.pod].free
		default:
			c.name, c.free = g.pool+"/"+g.model, g.free
		}
		slots[slot] = c
		used = append(used, slot)
		return c
	}
	for _, a := range p.stopping {
		if i, ok := ix.byID[a.NodeID]; ok {
			if s := slotOf(i); s >= 0 {
				c := get(s, i)
				c.stopping = append(c.stopping, a)
			}
		}
	}
	for _, v := range p.candidates() {
		if v.taken || !eligible(v) {
			continue
		}
		for _, i := range v.nodes {
			s := slotOf(i)
			if s < 0 {
				continue
			}
			c := get(s, i)
			if n := len(c.victims); n > 0 && c.victims[n-1] == v {
				continue // a gang with several nodes in one unit counts once
			}
			c.victims = append(c.victims, v)
			c.vgpus += v.gpus
		}
	}
	sort.Ints(used)
	var out []unitCand
	for _, s := range used {
		c := slots[s]
		if c.free+gpusOf(c.stopping)+c.vgpus >= k && (len(c.victims) > 0 || len(c.stopping) > 0) {
			out = append(out, *c)
		}
	}
	return out
}

func gpusOf(allocs []model.Allocation) int {
	n := 0
	for _, a := range allocs {
		n += a.GPUs.Count()
	}
	return n
}

// roomIn tries one unit: what is stopping first (free soon, costs nothing),
// then victims in preemption order until the request fits, then drops
// every victim the fit does not need.
func (p *planner) roomIn(c *unitCand, req *model.Request) *room {
	ix := p.ix
	cp := ix.Checkpoint()
	defer ix.Rollback(cp)
	fits := func() (Placement, bool) {
		inner := ix.Checkpoint()
		pl, ok := ix.placeUnit(c.u, req, p.cfg.Pools, placeOpts{})
		ix.Rollback(inner)
		return pl, ok
	}
	ix.releaseAll(c.stopping)
	if pl, ok := fits(); ok {
		return &room{unit: c.u, at: c.name, waits: c.stopping, place: pl}
	}
	n := 0
	for ; n < len(c.victims); n++ {
		ix.releaseAll(c.victims[n].allocs)
		if _, ok := fits(); ok {
			break
		}
	}
	if n == len(c.victims) {
		return nil
	}
	chosen := append([]*victim(nil), c.victims[:n+1]...)
	// Minimise: from the last-added back, put each victim back; if the fit
	// still holds it stays (is not preempted), else it is needed and is
	// released again. What remains is minimal: restoring any one breaks
	// the fit. Each step costs one victim's allocations, not all of them.
	for i := len(chosen) - 1; i >= 0; i-- {
		step := ix.Checkpoint()
		for _, a := range chosen[i].allocs {
			ix.Assign(a)
		}
		if _, ok := fits(); ok {
			chosen = append(chosen[:i], chosen[i+1:]...)
			continue
		}
		ix.Rollback(step)
	}
	for i, v := range chosen {
		if v.tier == tierShrink && len(v.allocs) > 1 {
			chosen[i] = p.trimShrink(v, fits)
		}
	}
	pl, ok := fits()
	if !ok {
		return nil
	}
	return &room{unit: c.u, at: c.name, victims: chosen, waits: c.stopping, place: pl}
}

// reclaimable totals, per group pod, the GPUs that preemption could ever
// free there this pass: every candidate victim's and everything stopping.
func (p *planner) reclaimable() map[*podState]int {
	out := map[*podState]int{}
	add := func(a model.Allocation) {
		if i, ok := p.ix.byID[a.NodeID]; ok {
			ns := &p.ix.nodes[i]
			out[p.ix.groups[ns.group].pods[ns.pod]] += a.GPUs.Count()
		}
	}
	for _, v := range p.cands {
		for _, a := range v.allocs {
			add(a)
		}
	}
	for _, a := range p.stopping {
		add(a)
	}
	return out
}

// roomImpossible rules preemption out from pod totals alone: no unit's
// free and reclaimable GPUs together reach the request. It never walks
// allocations, so refusing a hopeless gang costs O(pods).
func (p *planner) roomImpossible(req *model.Request) bool {
	if req.Topology == model.TopologyNode {
		return false
	}
	p.candidates()
	k := req.GPUs
	for _, r := range p.cfg.Pools.routes(req) {
		for _, g := range p.ix.groupsFor(r, req, p.cfg.Pools.Swap) {
			total := 0
			for _, pod := range g.pods {
				n := pod.free + p.reclaim[pod]
				if req.Topology == model.TopologyPod && n >= k {
					return false
				}
				total += n
			}
			if req.Topology == model.TopologyAny && total >= k {
				return false
			}
		}
	}
	return true
}
