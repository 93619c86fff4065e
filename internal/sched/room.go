package sched

import (
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
	cands := p.unitCands(req, eligible)
	sort.SliceStable(cands, func(a, b int) bool {
		x, y := cands[a], cands[b]
		if (x.name == prefer) != (y.name == prefer) {
			return x.name == prefer
		}
		nx, ny := req.GPUs-x.free-gpusOf(x.stopping), req.GPUs-y.free-gpusOf(y.stopping)
		if nx != ny {
			return nx < ny
		}
		return x.vgpus < y.vgpus
	})
	for t := 0; t < len(cands) && t < maxUnitsTried; t++ {
		if r := p.roomIn(&cands[t], req); r != nil {
			return r
		}
	}
	return nil
}

// unitCands lists the units whose free, stopping and victim GPUs could add
// up to the request, with their victims in preemption order.
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
	gi := map[*group]int{}
	for i, g := range groups {
		gi[g] = i
	}
	type key struct{ g, pod, node int }
	keyOf := func(node int) (key, bool) { // which unit a node belongs to
		ns := &ix.nodes[node]
		g, ok := gi[ix.groups[ns.group]]
		if !ok || !ns.eligible {
			return key{}, false
		}
		switch req.Topology {
		case model.TopologyNode:
			return key{g, -1, node}, true
		case model.TopologyPod:
			return key{g, ns.pod, -1}, true
		}
		return key{g, -1, -1}, true
	}
	byKey := map[key]*unitCand{}
	var keys []key
	get := func(uk key) *unitCand {
		c := byKey[uk]
		if c == nil {
			g := groups[uk.g]
			c = &unitCand{u: unit{g: g, pod: uk.pod, node: uk.node}}
			switch {
			case uk.node >= 0:
				c.name = ix.nodes[uk.node].node.ID
				c.free = ix.nodes[uk.node].free.Count()
			case uk.pod >= 0:
				c.name = g.pods[uk.pod].name
				c.free = g.pods[uk.pod].free
			default:
				c.name = g.pool + "/" + g.model
				c.free = g.free
			}
			byKey[uk] = c
			keys = append(keys, uk)
		}
		return c
	}
	for _, a := range p.stopping {
		if i, ok := ix.byID[a.NodeID]; ok {
			if uk, ok := keyOf(i); ok {
				get(uk).stopping = append(get(uk).stopping, a)
			}
		}
	}
	for _, v := range p.cands {
		if v.taken || !eligible(v) {
			continue
		}
		seen := map[key]bool{}
		for _, a := range v.allocs {
			i, ok := ix.byID[a.NodeID]
			if !ok {
				continue
			}
			uk, ok := keyOf(i)
			if !ok || seen[uk] {
				continue
			}
			seen[uk] = true
			c := get(uk)
			c.victims = append(c.victims, v)
			c.vgpus += v.gpus
		}
	}
	var out []unitCand
	for _, key := range keys {
		c := byKey[key]
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
	// Minimise: from the last-added back, drop any victim the fit can do
	// without. What remains is minimal: removing any one breaks the fit.
	for i := len(chosen) - 1; i >= 0; i-- {
		ix.Rollback(cp)
		ix.releaseAll(c.stopping)
		for j, v := range chosen {
			if j != i {
				ix.releaseAll(v.allocs)
			}
		}
		if _, ok := fits(); ok {
			chosen = append(chosen[:i], chosen[i+1:]...)
		}
	}
	ix.Rollback(cp)
	ix.releaseAll(c.stopping)
	for _, v := range chosen {
		ix.releaseAll(v.allocs)
	}
	pl, ok := fits()
	if !ok {
		return nil
	}
	return &room{unit: c.u, at: c.name, victims: chosen, waits: c.stopping, place: pl}
}
