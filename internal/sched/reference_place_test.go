package sched

import "github.com/berthsched/berth/internal/model"

// scanLargest is largest_placeable the way a scan computes it: one pass
// over every node for the largest free node set and per-pod totals.
func (r *refFleet) scanLargest() Largest {
	var l Largest
	podFree, podWhole := map[string]int{}, map[string]int{}
	total, whole := 0, 0
	for i := range r.nodes {
		rn := &r.nodes[i]
		if !rn.n.Schedulable() {
			continue
		}
		f := rn.free.Count()
		l.Node = max(l.Node, f)
		podFree[rn.n.Pod] += f
		total += f
		if f == rn.n.GPUs && rn.affinity() == 0 {
			podWhole[rn.n.Pod]++
			whole++
		}
	}
	for p, f := range podFree {
		l.Pod = max(l.Pod, placeable(f, podWhole[p], 8))
	}
	l.Any = placeable(total, whole, 8)
	return l
}

// take records an assignment in the reference fleet.
func (r *refFleet) take(i, n int) {
	rn := &r.nodes[i]
	m := rn.free
	for m.Count() > n {
		m &= m - 1 // lowest-index GPUs go first
	}
	m = rn.free ^ m
	if m.Count() != n {
		m = 0
		for _, g := range rn.free.Indices()[:n] {
			m |= model.MaskOf(g)
		}
	}
	rn.free &^= m
	rn.shapes[n]++
}

// place is the naive placer for the fill benchmark: for `node`, scan every
// node for the R1 best; for gangs, scan every node to total the pods, take
// the tightest pod that fits, then walk its nodes for whole nodes first and
// the largest pieces after. Same rules, no index.
func (r *refFleet) place(req *model.Request) bool {
	if req.Topology == model.TopologyNode {
		i, _ := r.bestNode(req)
		if i < 0 {
			return false
		}
		r.take(i, req.GPUs)
		return true
	}
	free, whole := map[string]int{}, map[string]int{}
	for i := range r.nodes {
		rn := &r.nodes[i]
		f := rn.free.Count()
		free[rn.n.Pod] += f
		if f == rn.n.GPUs && rn.affinity() == 0 {
			whole[rn.n.Pod]++
		}
	}
	k, best := req.GPUs, ""
	for p, f := range free {
		fits := (k%8 == 0 && whole[p] >= k/8) || (k%8 != 0 && f >= k)
		if fits && (best == "" || f < free[best] || (f == free[best] && p < best)) {
			best = p
		}
	}
	if best == "" {
		return false
	}
	need := k
	var pod []int
	for i := range r.nodes {
		if r.nodes[i].n.Pod == best {
			pod = append(pod, i)
		}
	}
	for _, i := range pod {
		if rn := &r.nodes[i]; need >= 8 && rn.free.Count() == 8 && rn.affinity() == 0 {
			r.take(i, 8)
			need -= 8
		}
	}
	for need > 0 {
		bi := -1
		for _, i := range pod {
			if f := r.nodes[i].free.Count(); f > 0 && (bi < 0 || f > r.nodes[bi].free.Count()) {
				bi = i
			}
		}
		n := min(need, r.nodes[bi].free.Count())
		r.take(bi, n)
		need -= n
	}
	return true
}
