package sched

import (
	"fmt"
	"slices"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// queued is a pending training job with its rank, the parts of its
// priority, the pass's shape of its request, how long it has waited and
// whether it may backfill: read while the jobs are walked in table order,
// they spare the rank-order walk a cache miss per job (a million jobs lie
// all over the heap). A job that fails the way its shape already failed
// is decided from this entry without reading the job.
type queued struct {
	job              *model.Job
	rank             rank
	base, preempting int
	waited           time.Duration // since it last joined the queue
	shape            int32         // index into planner.shapes
	backfills        bool          // mayBackfill
}

// passShape is one request shape of the pass's pending training, with
// what placing it found while the index was unchanged.
type passShape struct {
	key   shapeID
	req   model.Request // OwnerID and Priority are the first job's
	noFit noFit
	// noRoom is where searches for room by preemption failed: a job no
	// stronger than one that found no room finds none either.
	noRoom frontier
}

// internShape returns r's shape's index in p.shapes.
func (p *planner) internShape(r *model.Request) int32 {
	k := shapeKey(r)
	// Jobs next to each other in the table (submitted together: a sweep,
	// an array job) mostly share a shape: no map lookup for those.
	if l := p.lastShape; l < int32(len(p.shapes)) && p.shapes[l].key == k {
		return l
	}
	i, ok := p.shapeIdx[k]
	if !ok {
		i = int32(len(p.shapes))
		p.shapes = append(p.shapes, passShape{key: k, req: *r})
		p.shapeIdx[k] = i
	}
	p.lastShape = i
	return i
}

// queue lists pending training jobs in rank order (R2's total order).
func (p *planner) queue() []queued {
	bufs := queueSpare.take()
	p.queueBufs = bufs
	n := len(p.s.Jobs) - p.running
	if cap(bufs.table) < n {
		c := withHeadroom(n)
		bufs.table = make([]queued, 0, c)
	}
	q := bufs.table[:0]
	for i := range p.s.Jobs {
		j := p.s.Jobs[i]
		// Pending jobs still holding allocations (p.held, from prepare)
		// wait for them. The set is almost always empty: no hash of every
		// id then.
		if j.State == model.JobPending && (len(p.held) == 0 || !p.held[j.ID]) {
			pr := priorityOf(j, p.now, p.cfg.Aging, true)
			r := rankOf(pr.Effective, j)
			r.tier = sloTier(j, p.now, p.cfg.SLO, true)
			req := j.Request()
			q = append(q, queued{job: j, rank: r, base: pr.Base, preempting: pr.Preemptions,
				waited: p.now.Sub(j.Queued()), shape: p.internShape(&req), backfills: mayBackfill(j)})
		}
	}
	order := sortQueue(q)
	if order == nil {
		return q
	}
	permute(q, order)
	return q
}

// permute puts q in the order given (q[k] becomes the entry at order[k]),
// in place, one cycle of the permutation at a time, spending order as it
// goes (-1: placed). In place because a second queue to gather into, kept
// for the next pass as the first is, was 80 bytes a pending job: 70 MB
// of the heap at a million, twice that in RSS. The entries move once
// either way; the placement loop then reads them in order rather than
// chasing q[order[k]] a cache miss at a time.
func permute(q []queued, order []int32) {
	for start := range order {
		if order[start] < 0 {
			continue
		}
		hold, k := q[start], start
		for {
			src := int(order[k])
			order[k] = -1
			if src == start {
				q[k] = hold
				break
			}
			q[k] = q[src]
			k = src
		}
	}
}

// training places pending jobs in rank order. Each job, in turn: within
// quota, onto free GPUs; else as backfill inside a reservation it ends
// before; else by preempting the minimal set of victims ranked below it;
// else it holds the free GPUs of its best unit until it fills.
func (p *planner) training() {
	preempting := !p.budget.degraded // cleared once the budget says stop
	q := p.queue()
	defer p.putQueue(len(q))
	p.d.Pending = slices.Grow(p.d.Pending, len(q))
	p.prios = make([]Priority, 0, len(q))
	for k := range q {
		qj := q[k]
		j := qj.job
		prio := qj.priority()
		if p.bindsFull() {
			p.capQueue(q[k:])
			return
		}
		// One Request reused for every job: a fresh one escapes (the
		// placer keeps it) and cost an allocation per pending job a pass.
		// It is the shape's, with this job's id and priority: j.Request()
		// here would read the job, out of heap order.
		sh := &p.shapes[qj.shape]
		p.req = sh.req
		p.req.OwnerID, p.req.Priority = qj.rank.id, qj.base
		req := &p.req
		borrowed, why := p.quota.admit(j, req.GPUs)
		if why != nil {
			p.pend(qj.rank.id, why, prio)
			continue
		}
		key := sh.key
		var pl Placement
		if c := sh.noFit; c.why != nil && c.changes == p.ix.changes {
			why = c.why
		} else if pl, why = p.ix.place(req, p.cfg.Pools, placeOpts{}); why != nil {
			if p.unlent != "" && p.wouldBorrow(req) {
				// Not "infeasible": with the pool lent again it may fit.
				w := *why.plus("", "; "+p.unlent)
				if w.Code == ReasonInfeasible {
					w.Code = ReasonUnschedulable
				}
				why = &w
			}
			sh.noFit = noFit{why, p.ix.changes}
		}
		if why == nil {
			pl.Borrowed = pl.Borrowed || borrowed
			p.quota.add(j, req.GPUs, pl.Borrowed)
			p.d.Binds = append(p.d.Binds, Bind{Kind: model.OwnerTraining, OwnerID: j.ID, Preemptible: j.Preemptible || pl.Borrowed, Placement: pl})
			if j.Elastic != nil {
				p.bound = append(p.bound, growCand{job: j, rank: qj.rank, bind: len(p.d.Binds) - 1})
			}
			continue
		}
		if req.Fraction() {
			// A share waits for one to free up: it neither backfills,
			// preempts nor holds (the long tail does not make room).
			p.pend(qj.rank.id, why, prio)
			continue
		}
		if !qj.backfills {
			// No backfill to try: the job is not read.
		} else if b, ok := p.backfill(j); ok {
			p.quota.add(j, req.GPUs, true)
			p.d.Binds = append(p.d.Binds, b)
			continue
		}
		if why.Code == ReasonInfeasible {
			p.pend(qj.rank.id, why, prio)
			continue
		}
		// The reason is shared with every job that failed the same way
		// (the noFit cache) until this job's own words are added.
		reason := why
		if r, msg := p.room(qj, req, preempting); r != nil {
			p.pend(qj.rank.id, &r.reason, prio)
			continue
		} else if msg != "" {
			preempting = false
			reason = reason.plus("preemption", "; "+msg)
		} else if p.budget.degraded && qj.rank.tier == tierScheduled {
			// Work that would preempt, but R3's guard stops it: say so.
			reason = reason.plus("preemption", "; "+p.storageStopped())
		}
		// Below the reservation depth a job waits without holding.
		res := p.holdFreeWithin(qj, req, key, prio.Effective)
		if res != nil {
			p.holds++
			msg := fmt.Sprintf("; holding %d of %d GPUs at %s", res.HeldGPUs(), req.GPUs, res.At)
			if !res.ETA.IsZero() {
				msg += fmt.Sprintf(", full by %s without preemption", res.ETA.UTC().Format("2006-01-02 15:04"))
			}
			reason = reason.plus("", msg)
		}
		p.pend(qj.rank.id, reason, prio)
		p.noteBlocked(*req, why)
		if p.starving(qj, req, res) {
			p.late = append(p.late, lateJob{j, len(p.d.Pending) - 1})
		}
	}
}

// priority is the job's effective priority and its parts: the effective
// one is in the rank, the parts follow from it.
func (qj queued) priority() Priority {
	prio := Priority{Base: qj.base, Preemptions: qj.preempting, Effective: qj.rank.prio}
	prio.Waiting = prio.Effective - prio.Base - prio.Preemptions
	return prio
}

// bindsFull reports whether the pass has placed Config.MaxBinds
// allocations (a bind's parts are its allocations).
func (p *planner) bindsFull() bool {
	if p.cfg.MaxBinds <= 0 {
		return false
	}
	for _, b := range p.d.Binds[p.counted:] {
		p.placed += len(b.Parts)
	}
	p.counted = len(p.d.Binds)
	return p.placed >= p.cfg.MaxBinds
}

// capQueue leaves the rest of the queue to the next pass: not placed,
// held, backfilled or made room for, and said so. Elastic jobs do not
// grow this pass either: the GPUs are the queue's.
func (p *planner) capQueue(rest []queued) {
	why := &Reason{Code: ReasonUnschedulable, Constraint: "max_binds_per_pass",
		Message: fmt.Sprintf("not placed yet: this pass placed its first %d allocations (control.max_binds_per_pass is %d); the next pass goes on down the queue", p.placed, p.cfg.MaxBinds)}
	for _, qj := range rest {
		p.pend(qj.rank.id, why, qj.priority())
	}
	p.capped = true
}

// starving is R2's guard: a gang whose reservation (or, holding nothing
// yet, whose wait) has not filled within StarvationAfter even with active
// preemption, because no preemption of
// work ranked below it could make room (inference, work that may not be
// preempted, or higher-ranked work stands in the way): the cluster cannot
// host it, and a person should hear so. A gang merely waiting its turn in
// a busy queue, with victims it could take, is a queue, not this signal.
func (p *planner) starving(qj queued, req *model.Request, res *Reservation) bool {
	// Its wait for GPUs: the reservation's age, or with nothing to hold
	// yet (nothing free where it could go), its time in the queue.
	waited, at := qj.waited, ""
	if res != nil {
		waited, at = p.now.Sub(res.CreatedAt), res.At
	}
	if req.GPUs < p.cfg.Aging.MinGPUs || waited < p.cfg.StarvationAfter || len(p.late) >= 2*p.cfg.MaxStarvationAlerts {
		return false
	}
	// Later jobs rank lower: with no more power than a hopeless one they
	// are hopeless too, and with at least a hopeful one's, hopeful.
	key, pow := shapeKey(req), p.power(qj)
	if c, ok := p.hopeless[key]; ok && pow <= c {
		return true
	}
	if c, ok := p.hopeful[key]; ok && pow >= c {
		return false
	}
	// Whether the cluster could host it with the work ranked below it
	// gone: all of that work, including what room will not preempt for
	// it (work of its own priority or above, which it waits for
	// instead). A job behind running equals is a queue, not this alarm:
	// counted with room's rule, seed-correlated's months raised 267-420
	// alerts each, against 26-39, for the same decisions (BENCHMARKS.md,
	// "Equals do not preempt each other, nor twice within 8 hours").
	below := func(v *victim) bool {
		return qj.rank.above(v.rank) || (v.tier == tierBackfill && v.backfillFor == qj.rank.id)
	}
	if p.makeRoom(req, below, at) == nil {
		p.hopeless[key] = max(p.hopeless[key], pow)
		return true
	}
	if c, ok := p.hopeful[key]; !ok || pow < c {
		p.hopeful[key] = pow
	}
	return false
}

type roomResult struct{ reason Reason }

// room makes room for a training job by preemption, if the budget allows.
// It returns the result when victims were preempted (or it waits on work
// already stopping), or a message when the budget or storage forbade it.
func (p *planner) room(qj queued, req *model.Request, preempting bool) (*roomResult, string) {
	j, id := qj.job, qj.rank.id
	// Most passes have few reservations and no backfill: each lookup by
	// id skipped is a hash of it for every pending job of a large queue.
	var prev Reservation
	hadRes, own := false, false
	if len(p.prevRes) > 0 {
		prev, hadRes = p.prevRes[repKey{id, 0}]
	}
	if len(p.backfilled) > 0 {
		own = p.hasOwnBackfill(id)
	}
	if !preempting && !own && !hadRes {
		return nil, ""
	}
	// Later jobs rank lower, so with no more power and no higher base
	// priority than one that found no room they find none either (the
	// frontier keeps one such point per base priority). (Kept on the
	// pass's shape, not in a map keyed by it: a lookup per pending job
	// hashed the shape's strings.)
	sh := &p.shapes[qj.shape]
	if !hadRes && !own && sh.noRoom.covers(p.strength(qj)) {
		return nil, ""
	}
	// Training makes room by preemption only for work whose start is due
	// (R2's active preemption for gangs): the SLO class waits for the
	// churn of short jobs instead, since preempting one of them for
	// another only moves the wait and adds a restart.
	due := qj.rank.tier == tierScheduled
	// Waiting ranks a job ahead in the queue and lets it hold what frees,
	// but it preempts only work of a lower base priority: three 128-GPU
	// jobs of one priority, each preempting another once it had waited
	// two hours, preempted each other three times in four hours
	// (BENCHMARKS.md, "Equals do not preempt each other, nor twice within
	// 8 hours").
	eligible := func(v *victim) bool {
		if v.tier == tierBackfill && v.backfillFor == j.ID {
			return true
		}
		if v.tier == tierShrink {
			// Growth was idle capacity lent: any waiting work takes it
			// back, within the budget, before a whole job yields.
			return preempting && v.job.ID != j.ID
		}
		return preempting && due && qj.rank.above(v.rank) && p.power(qj) >= v.rank.prio+p.cfg.PreemptMargin && p.oldEnough(v, j.ID) && v.job.Priority < qj.base && p.restartedLongAgo(v)
	}
	r := p.makeRoom(req, eligible, prev.At)
	if r == nil {
		if !hadRes && !own {
			sh.noRoom.failed(p.strength(qj))
		}
		return nil, ""
	}
	ownOnly := true
	for _, v := range r.victims {
		ownOnly = ownOnly && v.tier == tierBackfill && v.backfillFor == j.ID
	}
	if v, msg := p.allow(r.victims, false, ownOnly, false); v != allowed {
		if len(r.victims) > 0 {
			return nil, msg
		}
	}
	p.preempt(r.victims, j.ID, false)
	res := p.claim(j.ID, model.OwnerTraining, 0, qj.rank.prio, r)
	return &roomResult{waitReason(res, r)}, ""
}

// wouldBorrow reports whether req could borrow the inference pool were it
// lent.
func (p *planner) wouldBorrow(req *model.Request) bool {
	pools := p.cfg.Pools
	pools.BorrowInference = true
	for _, r := range pools.routes(req) {
		if r.borrowed {
			return true
		}
	}
	return false
}

// power is what a queued job preempts with: its priority and its waiting
// bonus, not its preemption bonus (that one only protects).
func (p *planner) power(qj queued) int { return qj.rank.prio - qj.preempting }

func (p *planner) strength(qj queued) strength { return strength{p.power(qj), qj.base} }

// holdFreeWithin holds for the job if the pass has not reached MaxHolds
// and it is a gang that may hold (HoldMinGPUs), or a job whose node
// defragmentation is emptying: without its hold, what the moves free
// would go to whatever came next.
func (p *planner) holdFreeWithin(qj queued, req *model.Request, key shapeID, rank int) *Reservation {
	if p.holds >= p.cfg.MaxHolds || (req.GPUs < p.cfg.HoldMinGPUs && !p.relocating[qj.rank.id]) {
		return nil
	}
	return p.holdFree(qj.rank.id, req, key, rank)
}

func (p *planner) hasOwnBackfill(id string) bool { return p.backfilled[id] }

// pend records a pending job by its id: a job decided from its queue
// entry is not read.
func (p *planner) pend(id string, why *Reason, prio Priority) {
	p.prios = append(p.prios, prio) // one allocation for all, not one each
	p.d.Pending = append(p.d.Pending, Pending{Kind: model.OwnerTraining, OwnerID: id, Reason: why, Priority: &p.prios[len(p.prios)-1]})
}

// withHeadroom is the capacity a pooled buffer for n entries is made
// with: a quarter more. A table that grows by a few hundred jobs a pass
// would otherwise outgrow its buffers every pass, and at 650k pending
// each pass threw away 150 MB of them; allocated while a collection
// marks, they count as live for it, and the heap goal (so RSS) rose by
// several of them.
func withHeadroom(n int) int { return n + n/4 + 1024 }

// queueBufs are a pass's queue, kept for the next pass: a million
// entries of fresh memory each pass cost their page faults and a
// collection.
type queueBufs struct{ table []queued }

var queueSpare spare[queueBufs]

// putQueue clears the pass's queue (it points at jobs the next pass may
// not have) and hands its buffers back.
// Buffers far larger than the pass's queue go to the collector: after a
// burst drains, passes do not keep clearing (and the spare keep) a queue
// they no longer have.
func (p *planner) putQueue(n int) {
	b := p.queueBufs
	if b == nil {
		return
	}
	p.queueBufs = nil
	clear(b.table[:min(n, cap(b.table))])
	if cap(b.table) > 4*n+1024 {
		return
	}
	queueSpare.put(b)
}
