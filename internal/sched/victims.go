package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// victim is one running job that may be preempted: all of its allocations
// go together, because a gang that loses one node has lost its run.
type victim struct {
	job    *model.Job
	allocs []model.Allocation
	nodes  []int // index positions of allocs' nodes (-1 when unknown)
	gpus   int
	// tier is the §7 order: 0 backfill (on loan by construction),
	// 1 borrowed beyond quota, 2 preemptible within quota.
	tier    int
	rank    rank
	created time.Time
	// backfillFor is the reservation a backfill victim runs inside.
	backfillFor string
	taken       bool // preempted earlier in this pass
	pos         int  // place in the preemption order
	// inPool marks training borrowing the inference pool (R1): that pool
	// takes it back at once, without the minimum runtime or the budget.
	inPool bool
	// An elastic job above its minimum is two victims: its growth (tier
	// shrink, shrinkTo the size it keeps) and the rest. growth points
	// from the rest to the first; total is the job's GPUs.
	shrinkTo, total int
	growth          *victim
	// from is the growth victim a search took only part of (trimShrink):
	// preempting this part leaves the rest of from a victim still.
	from *victim
}

// Victim tiers, in the order they yield.
const (
	tierShrink = iota
	tierBackfill
	tierBorrowed
	tierWithinQuota
)

// victims lists the running training work that may ever be preempted, in
// preemption order: the growth of elastic jobs first (§9.4: shrink before
// any whole job yields), then backfill, then borrowed capacity (lowest
// priority, newest first: LIFO destroys the least work), then preemptible
// work within quota (lowest priority, newest first). Never: inference,
// non-preemptible jobs, guaranteed-quota work, jobs inside their minimum
// runtime, work already stopping.
func (p *planner) victims() []*victim {
	// Two walks: the first counts each victim's allocations, so that all
	// of them share one backing array and one of node positions (this
	// runs every pass that needs room, over every allocation). The
	// first notes each allocation's victim, so that the second reads a
	// slice; jobs are told apart by pointer, not by a hash of their id.
	byJob := map[*model.Job]*victim{}
	of := make([]*victim, len(p.s.Allocations))
	var order []*victim
	total := 0
	for k := range p.s.Allocations {
		a := &p.s.Allocations[k]
		if a.OwnerKind == model.OwnerInference {
			continue
		}
		j := p.owners[k]
		if j == nil || !j.Preemptible && j.Elastic == nil {
			continue // never a victim: skip the bookkeeping
		}
		v := byJob[j]
		if v == nil {
			v = &victim{job: j, rank: rankOf(priorityOf(j, p.now, p.cfg.Aging, false).Effective, j), tier: tierWithinQuota}
			v.rank.tier = sloTier(j, p.now, p.cfg.SLO, false)
			byJob[j] = v
			order = append(order, v)
		}
		of[k] = v
		v.gpus++ // for now: the count of its allocations
		total++
	}
	allocs, nodes := make([]model.Allocation, 0, total), make([]int, 0, total)
	for _, v := range order {
		n := v.gpus
		v.allocs, v.nodes, v.gpus = allocs[len(allocs):len(allocs):len(allocs)+n], nodes[len(nodes):len(nodes):len(nodes)+n], 0
		allocs, nodes = allocs[:len(allocs)+n], nodes[:len(nodes)+n]
	}
	for k, v := range of {
		if v == nil {
			continue
		}
		a := p.s.Allocations[k]
		v.allocs = append(v.allocs, a)
		if i, ok := p.ix.byID[a.NodeID]; ok {
			v.nodes = append(v.nodes, i)
		}
		v.gpus += a.GPUs.Count()
		if a.CreatedAt.After(v.created) {
			v.created = a.CreatedAt
		}
		switch {
		case a.OwnerKind == model.OwnerBackfill:
			v.tier = tierBackfill
			v.backfillFor = a.Reservation
		case a.Borrowed && v.tier != tierBackfill:
			v.tier = tierBorrowed
		}
	}
	out := make([]*victim, 0, len(order))
	for _, v := range p.splitGrowth(order) {
		v.inPool = p.cfg.Pools.Inference != ""
		for _, a := range v.allocs {
			if i, ok := p.ix.byID[a.NodeID]; !ok || p.ix.nodes[i].node.Pool != p.cfg.Pools.Inference {
				v.inPool = false
			}
		}
		if p.preemptible(v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(x, y *victim) int {
		if x.tier != y.tier {
			return cmp.Compare(x.tier, y.tier)
		}
		if x.rank.prio != y.rank.prio {
			return cmp.Compare(x.rank.prio, y.rank.prio)
		}
		if c := y.created.Compare(x.created); c != 0 {
			return c // newest first
		}
		return cmp.Compare(x.job.ID, y.job.ID)
	})
	for i, v := range out {
		v.pos = i
	}
	return out
}

// preemptible applies the "never below this line" rules of §7.
func (p *planner) preemptible(v *victim) bool {
	for _, a := range v.allocs {
		if a.Stopping {
			return false
		}
	}
	if v.tier == tierShrink {
		return true // growth is on loan, whatever the job's own terms
	}
	if !v.job.Preemptible {
		return false
	}
	if v.tier == tierWithinQuota && p.quota.governed(v.job) {
		return false // guaranteed-quota work
	}
	return true
}

// oldEnough is the minimum-runtime and thrash guard: a job restarted less
// than MinRuntime ago cannot be preempted again. Backfill yields to its own
// reservation regardless: that is the contract it ran under.
func (p *planner) oldEnough(v *victim, forReservation string) bool {
	if v.tier == tierBackfill && v.backfillFor == forReservation || v.tier == tierShrink {
		return true
	}
	started := v.job.StartedAt
	if started.IsZero() {
		started = v.created
	}
	return p.now.Sub(started) >= p.cfg.MinRuntime
}

// restartedLongAgo is RepeatMinRuntime's guard, for preemptions that
// training asks for: a job preempted before yields again only once it has
// run that long since its restart.
func (p *planner) restartedLongAgo(v *victim) bool {
	started := v.job.StartedAt
	if started.IsZero() {
		started = v.created
	}
	return v.job.PreemptCount == 0 || p.now.Sub(started) >= p.cfg.RepeatMinRuntime
}

// unit is where a request is tried when making room: one node for `node`,
// one pod of a group for `pod`, a whole group for `any`.
type unit struct {
	g         *group
	pod, node int
}

// placeUnit places req inside u only. It changes the index; callers roll
// back.
func (ix *Index) placeUnit(u unit, req *model.Request, pools Pools, opts placeOpts) (Placement, bool) {
	pl := ix.newPlacer(req, pools, opts)
	k := req.GPUs
	ok := false
	switch {
	case u.node >= 0:
		ns, free := &ix.nodes[u.node], ix.freeWhole(u.node, pools)
		if ns.eligible && free.Count() >= k && pl.fit(u.node, k) {
			pl.takeFrom(u.node, k, free)
			ok = true
		}
	case u.pod >= 0:
		ok = pl.gang(u.g, []int{u.pod}, u.pod)
	default:
		ok = pl.placeIn([]*group{u.g})
	}
	if !ok {
		return Placement{}, false
	}
	return Placement{Pool: u.g.pool, Parts: pl.parts}, true
}

// releaseAll returns allocations to the index (what-if: as if they had
// exited).
func (ix *Index) releaseAll(allocs []model.Allocation) {
	for _, a := range allocs {
		ix.Release(a)
	}
}
