package sched

import (
	"cmp"
	"slices"

	"github.com/berthsched/berth/internal/model"
)

// Elastic training (§9.4). A pending elastic job asks for its minimum
// (model.Job.Request), so it starts as soon as that fits, with every rule
// a rigid gang of that size has: quota, backfill, preemption, holds. Two
// things are its own:
//
//   - growth: after the queue has had its turn, GPUs nothing placed or
//     held are given to elastic jobs below their maximum, in rank order:
//     whole nodes beside the ones they run on (the same pod for `pod`),
//     or, for a `node` job, more GPUs of its own node, never another.
//     A job bound this pass grows inside its bind (no restart); a running
//     one grows by a Bind marked Grow, which the workload joins at its
//     next checkpoint.
//   - shrink: what an elastic job runs above its minimum is a victim of
//     its own, first in the preemption order, for any work that needs
//     room (inference, or training of any rank: growth was idle capacity
//     lent, not a place in the queue). It is a Preemption with ResizeTo:
//     only those allocations stop, the job runs on at the smaller size.
//     It costs what a preemption costs: the budget counts its GPUs, and
//     its price is the whole job's progress since its last checkpoint
//     (every worker restarts from it).
//
// A running job grows only GrowAfter after its last start or resize:
// growth into GPUs that are taken back minutes later buys a restart and
// nothing else.

// splitGrowth splits each elastic job above its minimum into the victim
// it keeps (oldest allocations first, until they reach the minimum) and
// the growth beyond it, and returns the victims with the growth added.
func (p *planner) splitGrowth(order []*victim) []*victim {
	out := order
	for _, v := range order {
		e := v.job.Elastic
		if e == nil || v.gpus <= e.MinGPUs {
			continue
		}
		stopping := false
		for _, a := range v.allocs {
			stopping = stopping || a.Stopping
		}
		if stopping {
			continue // a resize or preemption is in flight: wait for it
		}
		allocs := slices.Clone(v.allocs)
		// Oldest first; of allocations made together (one bind), the
		// smallest first: a node job bound at once is its minimum and its
		// growth as two parts of one node, and keeping the minimum's part
		// leaves the most to give back.
		slices.SortFunc(allocs, func(x, y model.Allocation) int {
			if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
				return c
			}
			if c := cmp.Compare(x.GPUs.Count(), y.GPUs.Count()); c != 0 {
				return c
			}
			return cmp.Compare(x.ID, y.ID)
		})
		kept, n := 0, 0
		for n < len(allocs) && kept < e.MinGPUs {
			// Of the parts made with this one, the smallest that alone
			// makes up the minimum goes first: bound as 6+2 for a minimum
			// of 6, keeping the 2 first would keep both and leave
			// nothing to give back.
			need := e.MinGPUs - kept
			for k := n; k < len(allocs) && allocs[k].CreatedAt.Equal(allocs[n].CreatedAt); k++ {
				if allocs[k].GPUs.Count() >= need {
					allocs[n], allocs[k] = allocs[k], allocs[n]
					break
				}
			}
			kept += allocs[n].GPUs.Count()
			n++
		}
		if n == len(allocs) {
			continue
		}
		g := &victim{job: v.job, rank: v.rank, tier: tierShrink, shrinkTo: kept, total: v.gpus}
		v.allocs, v.nodes, v.gpus = allocs[:n], p.nodesOf(allocs[:n]), kept
		g.allocs, g.nodes = allocs[n:], p.nodesOf(allocs[n:])
		for _, a := range g.allocs {
			g.gpus += a.GPUs.Count()
			if a.CreatedAt.After(g.created) {
				g.created = a.CreatedAt
			}
		}
		v.growth, v.total = g, g.total
		out = append(out, g)
	}
	return out
}

// trimShrink keeps what it can of a growth victim the fit needs: each of
// its workers, largest first (oldest among equals), goes back if the fit
// still holds without it and the job's size with it is one it allows.
// A job grown 2+2+4 gives a 2-GPU replica its 2-GPU worker, not all six
// GPUs of growth. All of a job's workers restart from the checkpoint
// whichever go, so the order is about GPUs kept, not work lost. It
// returns the part to stop, from v; v itself when nothing is kept. The
// index keeps the workers put back.
func (p *planner) trimShrink(v *victim, fits func() (Placement, bool)) *victim {
	e, step := v.job.Elastic, model.StepOf(v.job.Shape.Topology)
	order := slices.Clone(v.allocs)
	slices.SortStableFunc(order, func(x, y model.Allocation) int {
		return cmp.Compare(y.GPUs.Count(), x.GPUs.Count())
	})
	size := v.shrinkTo
	var stop []model.Allocation
	kept := false
	for _, a := range order {
		to := size + a.GPUs.Count()
		if e.AtMost(to, step) == to {
			cp := p.ix.Checkpoint()
			p.ix.Assign(a)
			if _, ok := fits(); ok {
				size, kept = to, true
				continue
			}
			p.ix.Rollback(cp)
		}
		stop = append(stop, a)
	}
	if !kept {
		return v
	}
	part := *v
	part.allocs, part.nodes, part.gpus, part.shrinkTo, part.from = stop, p.nodesOf(stop), gpusOf(stop), size, v
	return &part
}

func (p *planner) nodesOf(allocs []model.Allocation) []int {
	out := make([]int, 0, len(allocs))
	for _, a := range allocs {
		if i, ok := p.ix.byID[a.NodeID]; ok {
			out = append(out, i)
		}
	}
	return out
}

// growCand is an elastic job that may grow this pass: bind is its Bind in
// this pass's decision, or -1 when it was already running on allocs.
type growCand struct {
	job    *model.Job
	rank   rank
	bind   int
	allocs []model.Allocation
}

// growElastic hands the GPUs the queue left idle to elastic jobs below
// their maximum.
func (p *planner) growElastic() {
	if p.capped || len(p.bound) == 0 && len(p.elastic) == 0 {
		return
	}
	cands := p.bound
	if len(p.elastic) > 0 {
		byJob := map[string]int{}
		for _, j := range p.elastic {
			byJob[j.ID] = len(cands)
			r := rankOf(priorityOf(j, p.now, p.cfg.Aging, false).Effective, j)
			r.tier = sloTier(j, p.now, p.cfg.SLO, false)
			cands = append(cands, growCand{job: j, rank: r, bind: -1})
		}
		for _, a := range p.s.Allocations {
			if k, ok := byJob[a.OwnerID]; ok && a.OwnerKind != model.OwnerInference {
				cands[k].allocs = append(cands[k].allocs, a)
			}
		}
	}
	slices.SortStableFunc(cands, func(x, y growCand) int {
		switch {
		case x.rank.above(y.rank):
			return -1
		case y.rank.above(x.rank):
			return 1
		}
		return 0
	})
	// A job preempted or shrunk in this pass does not also grow in it:
	// its growth would be counted from allocations that are stopping,
	// and the stop, applied after it, would leave the job a size that
	// disagrees with what it holds.
	var stopping map[string]bool
	for _, pr := range p.d.Preemptions {
		if stopping == nil {
			stopping = map[string]bool{}
		}
		stopping[pr.JobID] = true
	}
	for _, c := range cands {
		if !stopping[c.job.ID] {
			p.growOne(c)
		}
	}
}

// growOne grows one job by whole nodes next to the ones it has: the
// largest allowed size that fits.
func (p *planner) growOne(c growCand) {
	j, e := c.job, c.job.Elastic
	var parts []Part
	cur := 0
	if c.bind >= 0 {
		parts = p.d.Binds[c.bind].Parts
	} else {
		for _, a := range c.allocs {
			if a.Stopping {
				return // a resize or preemption is in flight
			}
			parts = append(parts, Part{Node: a.NodeID, GPUs: a.GPUs})
		}
		if later(j.StartedAt, j.Resizing().ResizedAt).Add(p.cfg.GrowAfter).After(p.now) {
			return
		}
		// Growth can wait; a preemption's checkpoint (inference reclaiming
		// its pool) cannot. Only on storage with room for this write.
		b := &p.budget
		if b.degraded || b.inFlight+p.writeRate(j) > b.bandwidth*p.cfg.Storage.BudgetFraction/2 {
			return
		}
	}
	for _, pt := range parts {
		cur += pt.GPUs.Count()
	}
	if len(parts) == 0 || cur >= e.MaxGPUs {
		return
	}
	anchor, ok := p.ix.byID[parts[0].Node]
	if !ok {
		return
	}
	ns := &p.ix.nodes[anchor]
	g := p.ix.groups[ns.group]
	// Growth on the inference pool is borrowed from it, as a job placed
	// there is (R1): only while the pool is lent (Lending), marked so, and
	// counted beyond quota.
	onLoan := g.pool != "" && g.pool == p.cfg.Pools.Inference
	if onLoan && !p.cfg.Pools.BorrowInference {
		return
	}
	u, room := unit{g: g, pod: -1, node: -1}, g.free
	switch j.Shape.Topology {
	case model.TopologyPod:
		u.pod, room = ns.pod, g.pods[ns.pod].free
	case model.TopologyNode:
		// One NVLink domain: growth is more GPUs of the same node, of
		// those a whole-GPU job may take there.
		u.node, room = anchor, p.ix.freeWhole(anchor, p.cfg.Pools).Count()
	}
	step := model.StepOf(j.Shape.Topology)
	for size := e.AtMost(cur+room, step); size > cur; size = e.AtMost(size-1, step) {
		extra := size - cur
		borrowed, why := p.quota.admit(j, extra)
		if why != nil {
			continue
		}
		req := model.Request{Shape: j.Shape, Kind: model.OwnerTraining, OwnerID: j.ID, Priority: j.Priority, Preemptible: true}
		req.GPUs = extra
		req.CPUMilli, req.MemoryMiB = growthShare(j.Shape.CPUMilli, cur, size, j.Shape.GPUs), growthShare(j.Shape.MemoryMiB, cur, size, j.Shape.GPUs)
		cp := p.ix.Checkpoint()
		pl, ok := p.ix.placeUnit(u, &req, p.cfg.Pools, placeOpts{exclude: p.exclude})
		if !ok || step == model.ElasticStep && !p.wholeNodes(pl.Parts) {
			p.ix.Rollback(cp)
			continue
		}
		pl.Borrowed = pl.Borrowed || onLoan
		p.quota.add(j, extra, borrowed || pl.Borrowed)
		if c.bind >= 0 {
			b := &p.d.Binds[c.bind]
			b.Parts = append(b.Parts, pl.Parts...)
			b.Borrowed = b.Borrowed || borrowed || pl.Borrowed
			return
		}
		pl.Borrowed = pl.Borrowed || borrowed
		p.d.Binds = append(p.d.Binds, Bind{Kind: model.OwnerTraining, OwnerID: j.ID, Preemptible: true, Grow: true, ResizeFrom: cur, Placement: pl})
		return
	}
}

// growthShare is what growing from cur to size GPUs of a k-GPU shape
// adds of a shape-wide total: the difference of the two sizes' shares,
// so that the minimum's part and each growth add up to the size's share.
// Each part's share rounded up on its own came to more than the whole: a
// job declaring all of a node's cores stopped a GPU short of its maximum.
func growthShare(total int64, cur, size, k int) int64 {
	return max(0, share(total, size, k)-share(total, cur, k))
}

// wholeNodes reports whether every part takes all of its node's GPUs.
func (p *planner) wholeNodes(parts []Part) bool {
	for _, pt := range parts {
		i, ok := p.ix.byID[pt.Node]
		if !ok || pt.GPUs != p.ix.nodes[i].usable {
			return false
		}
	}
	return true
}
