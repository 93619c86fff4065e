package sched

import (
	"sort"

	"github.com/berthsched/berth/internal/model"
)

// Largest is largest_placeable: the biggest request of each topology that
// would be placed right now (GPU-wise; cpu and memory aside). It is the
// headline number (§3, §9): "any: 204, node: 0" is a cluster in trouble.
type Largest struct {
	Node int `json:"node"`
	Pod  int `json:"pod"`
	Any  int `json:"any"`
}

// TopologySummary is GET /cluster/topology: free sets, not free counts.
type TopologySummary struct {
	LargestPlaceable Largest `json:"largest_placeable"`
	FreeNodesFull    int     `json:"free_nodes_full"`
	FreeGPUs         int     `json:"free_gpus"`
	// FragmentedGPUs are free GPUs that no request of FragTarget GPUs in
	// one node can use: free GPUs on nodes with fewer than FragTarget free
	// (or fewer than the whole node, on nodes smaller than that).
	FragmentedGPUs int            `json:"fragmented_gpus"`
	FragTarget     int            `json:"frag_target"`
	FreeByNode     map[string]int `json:"free_by_node,omitempty"`
	Pods           []PodFree      `json:"pods,omitempty"`
	// SharedGPUs are GPUs holding shares (gpu_milli): out of every whole-GPU
	// count above. SharedFreeMilli is what they have left for more shares,
	// and LargestShare the most free milli on one schedulable GPU of the
	// sharing pool (shared or free): the largest share placeable now.
	SharedGPUs      int `json:"shared_gpus"`
	SharedFreeMilli int `json:"shared_free_milli"`
	LargestShare    int `json:"largest_placeable_milli"`
}

// PodFree is one pod's free map.
type PodFree struct {
	Pod           string `json:"pod"`
	FreeGPUs      int    `json:"free_gpus"`
	FreeNodesFull int    `json:"free_nodes_full"`
	Largest       int    `json:"largest_placeable"`
}

// placeable is the largest gang a set of nodes of size g can take GPU-wise:
// all of its free GPUs, unless that total is a multiple of the node size
// while some of it sits on partial nodes (such a gang must take whole
// nodes), in which case one fewer.
func placeable(free, empties, size int) int {
	if free > 0 && size > 1 && free%size == 0 && free > empties*size {
		return free - 1
	}
	return free
}

// largestNode is the biggest free set on one node of g, and that node.
func (ix *Index) largestNode(g *group) (int, int) {
	for f := g.size; f >= 1; f-- {
		if i := ix.minOver(g, f, 0, g.mixed(), -1, -1, f, nil); i >= 0 {
			return f, i
		}
	}
	return 0, -1
}

// largestPod is the biggest gang one pod of g can take, and that pod.
func largestPod(g *group) (int, int) {
	best, at := 0, -1
	for pi, p := range g.pods {
		if v := placeable(p.free, p.empties, g.size); v > best {
			best, at = v, pi
		}
	}
	return best, at
}

// Largest computes largest_placeable from the index's bucket and pod
// totals: O(groups × buckets + pods), never a walk over nodes.
func (ix *Index) Largest() Largest {
	groups := make([]*group, 0, len(ix.groups))
	for _, g := range ix.groups {
		if ix.counts(g) {
			groups = append(groups, g)
		}
	}
	return ix.largestOver(groups)
}

// Totals are the headline counts without the per-pod map: free GPUs, fully
// free nodes, and free GPUs no FragTarget-GPU node request can use.
func (ix *Index) Totals() (free, fullNodes, fragmented int) { return ix.free, ix.wholeFree, ix.frag }

// Summary is the full topology view. The per-node map costs a walk over
// nodes, so it is only built when asked for.
func (ix *Index) Summary(withNodes bool) TopologySummary {
	return ix.SummaryWith(withNodes, "sharing")
}

// SummaryWith is Summary naming the sharing pool, for the largest share.
func (ix *Index) SummaryWith(withNodes bool, sharingPool string) TopologySummary {
	s := TopologySummary{LargestPlaceable: ix.Largest(), FreeNodesFull: ix.wholeFree, FreeGPUs: ix.free,
		FragmentedGPUs: ix.frag, FragTarget: ix.fragTarget}
	for i := range ix.nodes {
		ns := &ix.nodes[i]
		if ns.node.Pool != sharingPool || !ns.eligible {
			continue
		}
		for g := range ns.node.GPUs {
			s.LargestShare = max(s.LargestShare, min(ix.freeMilli(i, model.GPUMask(1)<<uint(g)), 999))
		}
	}
	pods := map[string]*PodFree{}
	for _, g := range ix.groups {
		if !ix.counts(g) {
			continue
		}
		for _, p := range g.pods {
			pf := pods[p.name]
			if pf == nil {
				pf = &PodFree{Pod: p.name}
				pods[p.name] = pf
			}
			pf.FreeGPUs += p.free
			pf.FreeNodesFull += p.empties
			pf.Largest = max(pf.Largest, placeable(p.free, p.empties, g.size))
		}
	}
	for _, pf := range pods {
		s.Pods = append(s.Pods, *pf)
	}
	sort.Slice(s.Pods, func(a, b int) bool { return s.Pods[a].Pod < s.Pods[b].Pod })
	for i, used := range ix.shared {
		ns := &ix.nodes[i]
		for g, u := range used {
			if u > 0 && ns.usable.Has(g) {
				s.SharedGPUs++
				switch {
				case !ns.eligible:
				case ns.node.Partitioned(g):
					for _, m := range ix.migFree(i, g) {
						s.SharedFreeMilli += m
					}
				default:
					s.SharedFreeMilli += 1000 - u
				}
			}
		}
	}
	if withNodes {
		s.FreeByNode = make(map[string]int, len(ix.nodes))
		for i := range ix.nodes {
			ns := &ix.nodes[i]
			if ns.eligible && ix.counts(ix.groups[ns.group]) {
				s.FreeByNode[ns.node.ID] = ns.free.Count()
			}
		}
	}
	return s
}
