package sched

import (
	"fmt"
	"sort"

	"github.com/berthsched/berth/internal/model"
)

// inference places deployments' replicas before any training (§5): first
// every deployment up to min_replicas, then up to its target. A replica
// that does not fit may preempt training; to reach min_replicas it always
// may (availability is never throttled), above it only within the budget.
func (p *planner) inference() {
	deps := append([]model.Deployment(nil), p.s.Deployments...)
	sort.SliceStable(deps, func(a, b int) bool {
		if deps[a].Priority != deps[b].Priority {
			return deps[a].Priority > deps[b].Priority
		}
		return deps[a].ID < deps[b].ID
	})
	have := map[string]map[int][]string{} // deployment → replica → allocation ids
	for _, a := range p.s.Allocations {
		if a.OwnerKind != model.OwnerInference {
			continue
		}
		if have[a.OwnerID] == nil {
			have[a.OwnerID] = map[int][]string{}
		}
		have[a.OwnerID][a.Replica] = append(have[a.OwnerID][a.Replica], a.ID)
	}
	failed := map[string]bool{}
	for i := range deps {
		p.grow(&deps[i], have, deps[i].MinReplicas, true, failed)
	}
	for i := range deps {
		d := &deps[i]
		p.grow(d, have, d.Target(), false, failed)
		if reps := have[d.ID]; len(reps) > p.keep(d) {
			p.scaleDown(d, reps, p.keep(d))
		}
	}
	for i := range deps {
		if d := &deps[i]; !failed[d.ID] {
			p.standby(d, have[d.ID])
		}
	}
}

// keep is how many replicas d keeps: its target and, while it serves at
// all, the standby ones (Config.Standby) up to max_replicas.
func (p *planner) keep(d *model.Deployment) int {
	t := d.Target()
	if t == 0 || p.cfg.Standby < 0 || !p.inPool(d) {
		return t
	}
	return max(t, min(t+p.cfg.Standby, d.MaxReplicas))
}

// inPool reports whether d's replicas go to the inference pool.
func (p *planner) inPool(d *model.Deployment) bool {
	req := model.Request{Shape: d.ReplicaShape, Kind: model.OwnerInference}
	r := p.cfg.Pools.routes(&req)
	return p.cfg.Pools.Inference != "" && len(r) > 0 && r[0].pool == p.cfg.Pools.Inference
}

// standby places d's standby replicas, after every deployment's target
// and before training, in the inference pool's free GPUs. They are not
// demand, so one that does not fit waits silently for the next pass: no
// preemption (taking a borrower's GPUs for a replica nobody asked for yet
// cost more shed than it saved: BENCHMARKS.md), no pending reason.
func (p *planner) standby(d *model.Deployment, reps map[int][]string) {
	for next, keep := 0, p.keep(d); len(reps) < keep; next++ {
		if _, ok := reps[next]; ok {
			continue
		}
		if _, why := p.bindReplica(d, reps, next); why != nil {
			return
		}
	}
}

// bindReplica places replica next of d on free GPUs and binds it, or
// returns why it does not fit, with the request it tried.
func (p *planner) bindReplica(d *model.Deployment, reps map[int][]string, next int) (model.Request, *Reason) {
	req := model.Request{Shape: d.ReplicaShape, Kind: model.OwnerInference, OwnerID: d.ID, Replica: next, Priority: d.Priority}
	pl, why := p.ix.place(&req, p.cfg.Pools, placeOpts{exclude: p.exclude})
	if why == nil {
		reps[next] = nil
		p.d.Binds = append(p.d.Binds, Bind{Kind: model.OwnerInference, OwnerID: d.ID, Replica: next, Placement: pl})
	}
	return req, why
}

// forInference: inference outranks all training, so every preemptible
// training victim old enough is eligible.
// Borrowers of the inference pool yield to it at once.
func (p *planner) forInference(v *victim) bool { return v.inPool || p.oldEnough(v, "") }

func (p *planner) grow(d *model.Deployment, have map[string]map[int][]string, upTo int, floor bool, failed map[string]bool) {
	reps := have[d.ID]
	if reps == nil {
		reps = map[int][]string{}
		have[d.ID] = reps
	}
	for next := 0; len(reps) < upTo && !failed[d.ID]; next++ {
		if _, ok := reps[next]; ok {
			continue
		}
		req, why := p.bindReplica(d, reps, next)
		if why == nil {
			continue
		}
		if why.Code == ReasonUnschedulable && !req.Fraction() {
			key := resKey(d.ID, next)
			if r := p.makeRoom(&req, p.forInference, p.prevRes[repKey{d.ID, next}].At); r != nil {
				reclaim := true // only taking the pool back from borrowers
				for _, v := range r.victims {
					reclaim = reclaim && v.inPool
				}
				v, msg := p.allow(r.victims, floor, reclaim, reclaim)
				if len(r.victims) == 0 {
					v = allowed // only waiting on work already stopping
				}
				switch v {
				case allowed:
					p.preempt(r.victims, key, true)
					res := p.claim(d.ID, model.OwnerInference, next, d.Priority, r)
					reps[next] = nil
					wait := waitReason(res, r)
					p.d.Pending = append(p.d.Pending, Pending{Kind: model.OwnerInference, OwnerID: d.ID, Replica: next, Missing: 1,
						Reason: &wait})
					continue
				case throttled:
					// The reason and the page say the same numbers: both
					// come from the throttle worked out here.
					t := p.throttle(d, reps, upTo, next)
					why = &Reason{Code: ReasonUnschedulable, Constraint: "budget", Message: p.budgetLine(d.ID, t)}
				default:
					why = &Reason{Code: ReasonUnschedulable, Constraint: "preemption", Message: msg}
				}
			}
		}
		failed[d.ID] = true
		p.d.Pending = append(p.d.Pending, Pending{Kind: model.OwnerInference, OwnerID: d.ID, Replica: next, Missing: upTo - len(reps), Reason: why})
		p.noteBlocked(req, why)
	}
}

// waitReason says what a reservation waits for.
func waitReason(res *Reservation, r *room) Reason {
	msg := fmt.Sprintf("GPUs reserved at %s; waiting for %d allocations to stop", res.At, len(res.Waits))
	if len(r.victims) > 0 {
		ids := make([]string, len(r.victims))
		for i, v := range r.victims {
			ids[i] = v.job.ID
		}
		msg += fmt.Sprintf(" (preempted now: %v)", ids)
	}
	return Reason{Code: ReasonUnschedulable, Constraint: "preemption", Message: msg, BestGPUs: res.GPUs, BestAt: res.At}
}

// throttle works out, without committing anything, which jobs the blocked
// scale-up of d would preempt: the page lists them with their cost.
func (p *planner) throttle(d *model.Deployment, reps map[int][]string, upTo, from int) *throttle {
	cp := p.ix.Checkpoint()
	t := &throttle{want: upTo, have: len(reps), min: d.MinReplicas, missing: upTo - len(reps), gpus: d.ReplicaShape.GPUs}
	var marked, parted []*victim
	for next, n := from, 0; n < t.missing; next++ {
		if _, ok := reps[next]; ok {
			continue
		}
		n++
		req := model.Request{Shape: d.ReplicaShape, Kind: model.OwnerInference, OwnerID: d.ID, Replica: next}
		r := p.makeRoom(&req, p.forInference, "")
		if r == nil {
			break
		}
		for _, v := range r.victims {
			v.taken = true
			marked = append(marked, v)
			if v.from != nil && !v.from.taken {
				// Part of a growth: the rest is not a victim for the
				// next replica of this estimate (its workers are held).
				v.from.taken = true
				parted = append(parted, v.from)
			}
			p.ix.releaseAll(v.allocs)
		}
		p.ix.releaseAll(r.waits)
		for _, pt := range r.place.Parts {
			p.ix.Assign(model.Allocation{NodeID: pt.Node, GPUs: pt.GPUs})
		}
		t.restores++
	}
	for _, v := range marked {
		v.taken = false
		t.victimGPUs += v.gpus
	}
	for _, v := range parted {
		v.taken = false
	}
	t.victims = marked
	p.ix.Rollback(cp)
	p.throttled[d.ID] = t
	return t
}

// scaleDown stops replicas beyond the target. Which ones is a free
// defragmentation (R4's "relocate on natural churn"): stop first the
// replicas whose node ends up with the most free GPUs, so scale-down hands
// back whole nodes rather than holes; ties stop the highest-numbered.
func (p *planner) scaleDown(d *model.Deployment, reps map[int][]string, keep int) {
	freeAfter := map[int]int{}
	for _, a := range p.s.Allocations {
		if a.OwnerKind != model.OwnerInference || a.OwnerID != d.ID {
			continue
		}
		if i, ok := p.ix.byID[a.NodeID]; ok {
			freeAfter[a.Replica] = max(freeAfter[a.Replica], p.ix.nodes[i].free.Count()+a.GPUs.Count())
		}
	}
	nums := sortedInts(reps)
	sort.SliceStable(nums, func(a, b int) bool {
		if freeAfter[nums[a]] != freeAfter[nums[b]] {
			return freeAfter[nums[a]] > freeAfter[nums[b]]
		}
		return nums[a] > nums[b]
	})
	for _, r := range nums[:len(nums)-keep] {
		p.d.Stops = append(p.d.Stops, Stop{OwnerID: d.ID, Replica: r, Allocations: reps[r]})
	}
}
