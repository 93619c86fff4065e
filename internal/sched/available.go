package sched

import "github.com/berthsched/berth/internal/model"

// Available is the topology summary as a new training job sees it now, the
// one figure the server reports and the simulator samples:
//
//   - GPUs a reservation holds or targets are not free (R2: they are kept
//     from lower-ranked work), so they are out of every count;
//   - largest_placeable and free_nodes_full count only the pools a new
//     preemptible training job may use (R1): the small pool for requests
//     of up to small_max_gpus, the training pool above that, and the
//     inference pool's headroom up to borrow_max_gpus, which it may
//     borrow. The swap pool is relocation scratch and never counted; what
//     the inference pool lends goes back the moment inference scales up,
//     and work that may not be preempted cannot borrow it at all.
//
// free_gpus and fragmented_gpus still cover every pool but the swap pool
// (reservations out), so that allocated plus free adds up to the fleet.
// The index is left as it was.
func Available(ix *Index, reservations []Reservation, cfg Config, withNodes bool) TopologySummary {
	cfg = cfg.withDefaults()
	cp := ix.Checkpoint()
	defer ix.Rollback(cp)
	for i := range reservations {
		r := &reservations[i]
		ix.holdParts(r.Held)
		ix.holdParts(r.Target)
	}
	return ix.available(cfg.Pools, withNodes)
}

// holdParts takes, of parts, the GPUs that are still free.
func (ix *Index) holdParts(parts []Part) {
	for _, pt := range parts {
		if i, ok := ix.byID[pt.Node]; ok {
			if m := pt.GPUs & ix.nodes[i].free; m != 0 {
				ix.assign(i, m, 0, 0)
			}
		}
	}
}

// available is Available over the index as it stands.
func (ix *Index) available(pools Pools, withNodes bool) TopologySummary {
	s := ix.SummaryWith(withNodes, pools.SharingPool())
	if !pools.configured() {
		return s
	}
	smallMax := pools.smallMax()
	// A request above small_max_gpus routes to the training pool, one at
	// or below it to the small pool: the largest placeable is the larger
	// of the training pool's (when it is above small_max_gpus) and the
	// small pool's, capped there.
	big := ix.largestOver(ix.ownGroups(pools, smallMax+1, false))
	small := ix.largestOver(ix.ownGroups(pools, 1, false))
	// What a preemptible job may borrow (the inference pool's headroom,
	// up to borrow_max_gpus) counts too: it is there for it now.
	lent := ix.largestOver(ix.ownGroups(pools, smallMax+1, true))
	lendMax := pools.borrowMax()
	pick := func(b, sm, l int) int {
		b = max(b, min(l, lendMax))
		if b > smallMax {
			return b
		}
		return max(b, min(sm, smallMax))
	}
	s.LargestPlaceable = Largest{Node: pick(big.Node, small.Node, lent.Node), Pod: pick(big.Pod, small.Pod, lent.Pod), Any: pick(big.Any, small.Any, lent.Any)}
	s.FreeNodesFull = 0
	groups := ix.ownGroups(pools, ix.fragTarget, false)
	if lendMax >= ix.fragTarget {
		groups = append(groups, ix.ownGroups(pools, ix.fragTarget, true)...)
	}
	for _, g := range groups {
		s.FreeNodesFull += g.empties
	}
	return s
}

// ownGroups lists the groups a new training job of k GPUs may be placed
// in: with borrowed, only those a preemptible one may borrow; else those
// it may use as its own.
func (ix *Index) ownGroups(pools Pools, k int, borrowed bool) []*group {
	req := model.Request{Shape: model.Shape{GPUs: k, Topology: model.TopologyNode}, Kind: model.OwnerTraining, Preemptible: borrowed}
	var out []*group
	for _, r := range pools.routes(&req) {
		if r.borrowed != borrowed {
			continue
		}
		for _, g := range ix.groupsFor(r, &req, pools.Swap) {
			if ix.counts(g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// largestOver is largest_placeable over some groups only.
func (ix *Index) largestOver(groups []*group) Largest {
	var l Largest
	for _, g := range groups {
		n, _ := ix.largestNode(g)
		p, _ := largestPod(g)
		l.Node = max(l.Node, n)
		l.Pod = max(l.Pod, p)
		l.Any = max(l.Any, placeable(g.free, g.empties, g.size))
	}
	return l
}
