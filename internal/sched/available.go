package sched

import "github.com/berthsched/berth/internal/model"

// Available is the topology summary as a new training job sees it now, the
// one figure the server reports and the simulator samples:
//
//   - GPUs a reservation holds or targets are not free (R2: they are kept
//     from lower-ranked work), so they are out of every count;
//   - largest_placeable and free_nodes_full count only the pools a new
//     training job may use as its own (R1): the small pool for requests of
//     up to small_max_gpus, the training pool above that. The inference
//     pool's headroom is lent to training only as preemptible work and the
//     swap pool is relocation scratch, so neither is counted.
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
	smallMax := pools.SmallMaxGPUs
	if smallMax == 0 {
		smallMax = 4
	}
	// A request above small_max_gpus routes to the training pool, one at
	// or below it to the small pool: the largest placeable is the larger
	// of the training pool's (when it is above small_max_gpus) and the
	// small pool's, capped there.
	big := ix.largestOver(ix.ownGroups(pools, smallMax+1))
	small := ix.largestOver(ix.ownGroups(pools, 1))
	pick := func(b, sm int) int {
		if b > smallMax {
			return b
		}
		return max(b, min(sm, smallMax))
	}
	s.LargestPlaceable = Largest{Node: pick(big.Node, small.Node), Pod: pick(big.Pod, small.Pod), Any: pick(big.Any, small.Any)}
	s.FreeNodesFull = 0
	for _, g := range ix.ownGroups(pools, ix.fragTarget) {
		s.FreeNodesFull += g.empties
	}
	return s
}

// ownGroups lists the groups a new, non-borrowing training job of k GPUs
// may be placed in.
func (ix *Index) ownGroups(pools Pools, k int) []*group {
	req := model.Request{Shape: model.Shape{GPUs: k, Topology: model.TopologyNode}, Kind: model.OwnerTraining}
	var out []*group
	for _, r := range pools.routes(&req) {
		if r.borrowed {
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
