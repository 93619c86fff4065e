package sched

import (
	"fmt"
	"sort"

	"github.com/berthsched/berth/internal/model"
)

// Relocation moves one inference replica to make room (R4), make before
// break: start the replica at To, and only once it is ready drain the From
// allocations on FromNode.
type Relocation struct {
	Deployment string    `json:"deployment"`
	Replica    int       `json:"replica"`
	FromNode   string    `json:"from_node"`
	From       []string  `json:"from_allocations"`
	To         Placement `json:"to"`
	// For is the request the move makes room for.
	For string `json:"for"`
}

// repKey names one replica of one deployment.
type repKey struct {
	dep string
	num int
}

// replicaAt is one single-node inference replica sitting on a node.
type replicaAt struct {
	dep    *model.Deployment
	num    int
	allocs []string
	gpus   int
}

// maxTargetsTried bounds the work one pass spends looking for a node to
// empty; the next pass tries again.
const maxTargetsTried = 8

// defrag proposes relocations for requests that only fragmentation keeps
// out (§6, R4). Inference replicas are the lever: they hold no state worth
// preserving, so moving them costs a brief over-provision and no training
// is preempted. For each blocked request it picks the node that needs the
// fewest GPUs moved, moves those replicas into other partial nodes (or the
// swap pool), and keeps new work off that node until it is free. Moves in
// flight count against MaxRelocations.
func (p *planner) defrag() {
	budget := p.cfg.MaxRelocations - len(p.s.Relocations)
	if budget <= 0 || len(p.blocked) == 0 {
		return
	}
	helped := map[string]bool{}
	moving := map[repKey]bool{}
	for _, r := range p.s.Relocations {
		helped[r.For] = true
		moving[repKey{r.Deployment, r.Replica}] = true
	}
	onNode := p.replicasByNode(moving)
	if len(onNode) == 0 {
		return
	}
	tried := map[shapeID]bool{} // shapes that found no node to empty
	for _, b := range p.blocked {
		if budget <= 0 {
			return
		}
		key := shapeKey(&b.req)
		if helped[b.req.OwnerID] || tried[key] {
			continue
		}
		own := p.ownHold(&b.req)
		if n, node := p.relocateFor(&b.req, onNode, budget, own); n > 0 {
			budget -= n
			helped[b.req.OwnerID] = true
			if own == nil {
				p.holdFor(b, node)
			}
		} else if len(own) == 0 {
			tried[key] = true // another request of this shape holds nothing either
		}
	}
}

// ownHold counts, by node, the GPUs the training request's own
// reservation of this pass holds (nil for none). They are free to it:
// counted as in use, the GPUs a job keeps on the node it waits for hid
// that node from its own defragmentation, and the last replica there could
// never move out. They stay held: no replica moves onto them.
func (p *planner) ownHold(req *model.Request) map[int]int {
	if req.Kind != model.OwnerTraining {
		return nil
	}
	for _, r := range p.reservations {
		if r.Owner != req.OwnerID || r.Kind != model.OwnerTraining {
			continue
		}
		own := map[int]int{}
		for _, pt := range r.Held {
			if i, ok := p.ix.byID[pt.Node]; ok {
				own[i] += pt.GPUs.Count()
			}
		}
		return own
	}
	return nil
}

type target struct {
	node, moved int
	reps        []replicaAt
}

// relocateFor empties one node enough for req, counting what req holds
// there (own) as its; it returns the moves made and the node.
func (p *planner) relocateFor(req *model.Request, onNode map[int][]replicaAt, budget int, own map[int]int) (int, int) {
	ix, k := p.ix, req.GPUs
	usable := map[*group]bool{}
	for _, r := range p.cfg.Pools.routes(req) {
		for _, g := range ix.groupsFor(r, req, p.cfg.Pools.Swap) {
			usable[g] = g.size >= k
		}
	}
	// Only nodes that hold replicas can be emptied by moving them.
	var cands []target
	for i, reps := range onNode {
		ns := &ix.nodes[i]
		if !ns.eligible || p.exclude[i] || !usable[ix.groups[ns.group]] {
			continue
		}
		if sub, moved := cheapestSubset(reps, k-ns.free.Count()-own[i]); sub != nil && len(sub) <= budget {
			cands = append(cands, target{i, moved, sub})
		}
	}
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].moved != cands[b].moved {
			return cands[a].moved < cands[b].moved
		}
		if len(cands[a].reps) != len(cands[b].reps) {
			return len(cands[a].reps) < len(cands[b].reps)
		}
		return cands[a].node < cands[b].node
	})
	for t := 0; t < len(cands) && t < maxTargetsTried; t++ {
		if moves := p.tryEmpty(cands[t], req); moves != nil {
			p.d.Relocations = append(p.d.Relocations, moves...)
			return len(moves), cands[t].node
		}
	}
	return 0, -1
}

// holdFor keeps the free GPUs of the node being emptied for the training
// job it is emptied for, when the job held nothing this pass (jobs under
// HoldMinGPUs hold only once a move is in flight for them): the moves
// free the rest, and nothing else may take what they free.
func (p *planner) holdFor(b blockedReq, node int) {
	req := &b.req
	if req.Kind != model.OwnerTraining {
		return
	}
	ns := &p.ix.nodes[node]
	held := p.hold([]Part{{Node: ns.node.ID, GPUs: ns.free}})
	if len(held) == 0 {
		return
	}
	res := &Reservation{Owner: req.OwnerID, Kind: model.OwnerTraining, Rank: req.Priority,
		At: ns.node.ID, Held: held, CreatedAt: p.createdAt(req.OwnerID, 0), GPUs: req.GPUs}
	if pe := &p.d.Pending[b.pending]; pe.OwnerID == req.OwnerID {
		if pe.Priority != nil {
			res.Rank = pe.Priority.Effective
		}
		pe.Reason = pe.Reason.plus("", fmt.Sprintf("; holding %d of %d GPUs at %s", held[0].GPUs.Count(), req.GPUs, ns.node.ID))
	}
	p.reservations = append(p.reservations, res)
}

// tryEmpty finds every replica of the target a new home, or changes nothing.
func (p *planner) tryEmpty(t target, req *model.Request) []Relocation {
	ix := p.ix
	cp := ix.Checkpoint()
	p.exclude[t.node] = true
	var moves []Relocation
	for _, r := range t.reps {
		rr := model.Request{Shape: r.dep.ReplicaShape, Kind: model.OwnerInference, OwnerID: r.dep.ID, Replica: r.num, Priority: r.dep.Priority}
		opts := placeOpts{exclude: p.exclude, partialOnly: true}
		pl, why := ix.place(&rr, p.cfg.Pools, opts)
		if why != nil && p.cfg.Pools.Swap != "" {
			opts.routes = []route{{pool: p.cfg.Pools.Swap}}
			pl, why = ix.place(&rr, p.cfg.Pools, opts)
		}
		if why != nil {
			ix.Rollback(cp)
			delete(p.exclude, t.node)
			return nil
		}
		moves = append(moves, Relocation{Deployment: r.dep.ID, Replica: r.num, FromNode: ix.nodes[t.node].node.ID,
			From: r.allocs, To: pl, For: req.OwnerID})
	}
	return moves
}

// cheapestSubset picks the replicas whose GPUs add up to at least need with
// the fewest GPUs moved (then the fewest replicas). Nodes hold a handful of
// replicas, so trying every subset is cheap; past 12 only the first 12 are
// considered.
func cheapestSubset(reps []replicaAt, need int) ([]replicaAt, int) {
	if need <= 0 {
		return nil, 0
	}
	n := min(len(reps), 12)
	best, bestSum, bestLen := -1, 0, 0
	for m := 1; m < 1<<n; m++ {
		sum, cnt := 0, 0
		for b := 0; b < n; b++ {
			if m&(1<<b) != 0 {
				sum += reps[b].gpus
				cnt++
			}
		}
		if sum >= need && (best < 0 || sum < bestSum || (sum == bestSum && cnt < bestLen)) {
			best, bestSum, bestLen = m, sum, cnt
		}
	}
	if best < 0 {
		return nil, 0
	}
	var out []replicaAt
	for b := 0; b < n; b++ {
		if best&(1<<b) != 0 {
			out = append(out, reps[b])
		}
	}
	return out, bestSum
}

// replicasByNode lists the movable replicas on each node: single-node
// inference replicas of known deployments that are not already moving.
func (p *planner) replicasByNode(moving map[repKey]bool) map[int][]replicaAt {
	deps := map[string]*model.Deployment{}
	for i := range p.s.Deployments {
		deps[p.s.Deployments[i].ID] = &p.s.Deployments[i]
	}
	type seen struct {
		rep   *replicaAt
		node  string
		multi bool // spans nodes: not movable by this mechanism
	}
	byKey := map[repKey]*seen{}
	var order []repKey
	for _, a := range p.s.Allocations {
		if a.OwnerKind != model.OwnerInference || a.GPUMilli > 0 {
			continue // shares live in the sharing pool, outside defragmentation
		}
		d := deps[a.OwnerID]
		if d == nil || moving[repKey{a.OwnerID, a.Replica}] {
			continue
		}
		k := repKey{a.OwnerID, a.Replica}
		sn := byKey[k]
		if sn == nil {
			sn = &seen{rep: &replicaAt{dep: d, num: a.Replica}, node: a.NodeID}
			byKey[k] = sn
			order = append(order, k)
		}
		sn.rep.allocs = append(sn.rep.allocs, a.ID)
		sn.rep.gpus += a.GPUs.Count()
		sn.multi = sn.multi || a.NodeID != sn.node
	}
	out := map[int][]replicaAt{}
	for _, k := range order {
		if sn := byKey[k]; !sn.multi {
			if i, ok := p.ix.byID[sn.node]; ok {
				out[i] = append(out[i], *sn.rep)
			}
		}
	}
	return out
}
