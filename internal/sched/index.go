package sched

import (
	"sort"

	"github.com/berthsched/berth/internal/model"
)

// Index is the free state of the fleet, organised for placement. It is built
// from a snapshot (nodes and allocations), changed only through assign and
// release, and every change can be rolled back to a checkpoint: gangs are
// tentative transactions on it (ARCHITECTURE rule 4).
type Index struct {
	nodes  []nodeState
	loc    []nodeLoc
	byID   map[string]int
	groups []*group
	// fragTarget is the request size the fragmentation figure is measured
	// against (8: a TP8 job).
	fragTarget int
	// swap is R4's swap pool: its nodes are relocation scratch, not
	// capacity, so they count in no total and no largest_placeable.
	swap string

	free, frag, wholeFree int // cluster totals over schedulable nodes
	journal               []journalEntry
	// shared is, per node with shared GPUs, each GPU's milli in use by
	// shares. A shared GPU is out of free for whole-GPU requests until its
	// last share leaves.
	shared map[int][]int
	// migShares is, per MIG-partitioned GPU (node, GPU), the milli of each
	// share on it: which of its instances are free follows (migFree).
	migShares map[[2]int][]migShare
	// placer scores shares against the sharing pool's demand mix (nil
	// until SetMix: each share is then measured against itself).
	placer *SharePlacer
	// changes counts every assign and release, rollbacks included: equal
	// counts mean an unchanged index.
	changes int
}

// nodeState is one node's free state inside the index.
// nodeLoc is where a node sits, kept apart from nodeState so that walks
// over many nodes (victim search) touch a few bytes each.
type nodeLoc struct {
	group, pod int32
	eligible   bool
}

type nodeState struct {
	node   *model.Node
	group  int
	pod    int // index into the group's pods
	local  int // position inside the pod
	usable model.GPUMask
	free   model.GPUMask
	cpu    int64 // free cpu_milli
	mem    int64 // free memory_mib
	// shapes counts the node's allocations by GPU count; it decides the
	// node's shape affinity (R1).
	shapes   []shapeCount
	eligible bool
	bucket   int // current bucket, -1 when not indexed
}

type shapeCount struct{ gpus, n int }

// group holds the nodes that are interchangeable for placement: same pool,
// same GPU model, same GPU count. A multi-node gang stays inside one group.
type group struct {
	pool, model string
	idx         int // position in Index.groups
	size        int // GPUs per node
	nclass      int // shape classes: 0 empty, 1..size one shape, size+1 mixed
	pods        []*podState
	// podsWith[b] has bit p set when pod p holds a node in bucket b.
	podsWith []bitset
	free     int // free GPUs on schedulable nodes
	empties  int // schedulable nodes with every GPU free
	capacity int // GPUs on all nodes, schedulable or not (for infeasibility)
	maxCPU   int64
	maxMem   int64
}

type podState struct {
	name    string
	nodes   []int // global node indices, ascending
	words   int   // bitset words per bucket
	buckets []uint64
	counts  []int32
	free    int
	empties int
	gpus    int // all GPUs in this group-pod, schedulable or not
}

func (g *group) mixed() int                { return g.size + 1 }
func (g *group) bucketOf(f, c int) int     { return f*g.nclass + c }
func (g *group) unbucket(b int) (int, int) { return b / g.nclass, b % g.nclass }

type journalEntry struct {
	node     int
	mask     model.GPUMask
	cpu, mem int64
	assign   bool
	milli    int // a share of the one GPU in mask; 0 for whole GPUs
	inst     int // the share's MIG instance (from 1); 0 for none
}

// NewIndex builds the index for a snapshot under cfg (its pools and
// fragmentation target). Nodes are ordered by (pod, id) so that "first in a
// bucket" is the same node on every run. Allocations on unknown nodes are
// ignored: they are the reconciler's business, not the placer's.
func NewIndex(nodes []model.Node, allocs []model.Allocation, cfg Config) *Index {
	cfg = cfg.withDefaults()
	sorted := byPodThenID(nodes)
	ix := &Index{nodes: make([]nodeState, len(sorted)), byID: make(map[string]int, len(sorted)),
		fragTarget: cfg.FragTarget, swap: cfg.Pools.Swap}
	type gkey struct {
		pool, model string
		size        int
	}
	gidx := map[gkey]int{}
	podIdx := map[[2]int]int{} // (group, pod name id) → pod index
	podName := map[string]int{}
	for i, n := range sorted {
		k := gkey{n.Pool, n.Model, n.GPUs}
		gi, ok := gidx[k]
		if !ok {
			gi = len(ix.groups)
			gidx[k] = gi
			ix.groups = append(ix.groups, &group{pool: n.Pool, model: n.Model, idx: gi, size: n.GPUs, nclass: n.GPUs + 2})
		}
		g := ix.groups[gi]
		pn, ok := podName[n.Pod]
		if !ok {
			pn = len(podName)
			podName[n.Pod] = pn
		}
		pi, ok := podIdx[[2]int{gi, pn}]
		if !ok {
			pi = len(g.pods)
			podIdx[[2]int{gi, pn}] = pi
			g.pods = append(g.pods, &podState{name: n.Pod})
		}
		p := g.pods[pi]
		usable := model.FullMask(n.GPUs) &^ n.QuarantinedGPUs
		ix.nodes[i] = nodeState{node: n, group: gi, pod: pi, local: len(p.nodes), usable: usable, free: usable,
			cpu: n.CPUMilli, mem: n.MemoryMiB, eligible: n.Schedulable(), bucket: -1}
		p.nodes = append(p.nodes, i)
		p.gpus += n.GPUs
		g.capacity += n.GPUs
		g.maxCPU = max(g.maxCPU, n.CPUMilli)
		g.maxMem = max(g.maxMem, n.MemoryMiB)
		ix.byID[n.ID] = i
	}
	for _, g := range ix.groups {
		nb := (g.size + 1) * g.nclass
		g.podsWith = make([]bitset, nb)
		for b := range g.podsWith {
			g.podsWith[b] = newBitset(len(g.pods))
		}
		for _, p := range g.pods {
			p.words = (len(p.nodes) + 63) / 64
			p.buckets = make([]uint64, nb*p.words)
			p.counts = make([]int32, nb)
		}
	}
	for _, a := range allocs {
		ni, ok := ix.byID[a.NodeID]
		if !ok {
			continue
		}
		ns := &ix.nodes[ni]
		if a.GPUMilli > 0 {
			ix.addShare(ni, a.GPUs, a.GPUMilli, a.MIGInstance)
		} else {
			ns.free &^= a.GPUs
			ns.addShape(a.GPUs.Count(), 1)
		}
		ns.cpu -= a.CPUMilli
		ns.mem -= a.MemoryMiB
	}
	ix.loc = make([]nodeLoc, len(ix.nodes))
	for i := range ix.nodes {
		ns := &ix.nodes[i]
		ix.loc[i] = nodeLoc{int32(ns.group), int32(ns.pod), ns.eligible}
		ix.link(i)
	}
	return ix
}

func (ns *nodeState) addShape(gpus, delta int) {
	for i := range ns.shapes {
		if ns.shapes[i].gpus == gpus {
			ns.shapes[i].n += delta
			if ns.shapes[i].n == 0 {
				ns.shapes = append(ns.shapes[:i], ns.shapes[i+1:]...)
			}
			return
		}
	}
	if delta > 0 {
		ns.shapes = append(ns.shapes, shapeCount{gpus, delta})
	}
}

// class is the node's shape affinity: 0 when it holds no allocation, s when
// every allocation on it has s GPUs, mixed otherwise.
func (ix *Index) class(ns *nodeState) int {
	switch len(ns.shapes) {
	case 0:
		return 0
	case 1:
		return ns.shapes[0].gpus
	}
	return ix.groups[ns.group].mixed()
}

// whole reports whether a node is entirely free: no allocation, no
// quarantined GPU. Only whole nodes serve jobs that are multiples of the
// node size.
func (ns *nodeState) whole() bool {
	return len(ns.shapes) == 0 && ns.free == model.FullMask(ns.node.GPUs)
}

// counts reports whether a group's nodes count as capacity in the cluster
// totals: all but the swap pool's.
func (ix *Index) counts(g *group) bool { return ix.swap == "" || g.pool != ix.swap }

// link adds the node's contribution to buckets and totals; unlink removes it.
func (ix *Index) link(i int) {
	ns := &ix.nodes[i]
	if !ns.eligible {
		return
	}
	ix.account(ns, +1)
	f := ns.free.Count()
	if f == 0 {
		return
	}
	g := ix.groups[ns.group]
	p := g.pods[ns.pod]
	b := g.bucketOf(f, ix.class(ns))
	ns.bucket = b
	p.buckets[b*p.words+ns.local>>6] |= 1 << uint(ns.local&63)
	if p.counts[b]++; p.counts[b] == 1 {
		g.podsWith[b].set(ns.pod)
	}
}

func (ix *Index) unlink(i int) {
	ns := &ix.nodes[i]
	if !ns.eligible {
		return
	}
	ix.account(ns, -1)
	if ns.bucket < 0 {
		return
	}
	g := ix.groups[ns.group]
	p := g.pods[ns.pod]
	b := ns.bucket
	ns.bucket = -1
	p.buckets[b*p.words+ns.local>>6] &^= 1 << uint(ns.local&63)
	if p.counts[b]--; p.counts[b] == 0 {
		g.podsWith[b].clear(ns.pod)
	}
}

// account adds (sign +1) or removes (-1) the node's free GPUs and whole-node
// status from its pod, its group and the cluster totals.
func (ix *Index) account(ns *nodeState, sign int) {
	g := ix.groups[ns.group]
	p := g.pods[ns.pod]
	f := sign * ns.free.Count()
	whole := 0
	if ns.whole() {
		whole = sign
	}
	g.free += f
	p.free += f
	g.empties += whole
	p.empties += whole
	if ix.counts(g) {
		ix.free += f
		ix.wholeFree += whole
		if n := ns.free.Count(); n < ix.fragTarget && n < ns.node.GPUs {
			ix.frag += f
		}
	}
}

// assign takes mask, cpu and memory on node i. The caller guarantees they
// are free.
func (ix *Index) assign(i int, mask model.GPUMask, cpu, mem int64) {
	ix.changes++
	ix.unlink(i)
	ns := &ix.nodes[i]
	ns.free &^= mask
	ns.cpu -= cpu
	ns.mem -= mem
	ns.addShape(mask.Count(), 1)
	ix.link(i)
	ix.journal = append(ix.journal, journalEntry{i, mask, cpu, mem, true, 0, 0})
}

// release gives back what assign took.
func (ix *Index) release(i int, mask model.GPUMask, cpu, mem int64) {
	ix.changes++
	ix.unlink(i)
	ns := &ix.nodes[i]
	ns.free |= mask & ns.usable
	ns.cpu += cpu
	ns.mem += mem
	ns.addShape(mask.Count(), -1)
	ix.link(i)
	ix.journal = append(ix.journal, journalEntry{i, mask, cpu, mem, false, 0, 0})
}

// Checkpoint marks the current state; Rollback returns to it.
func (ix *Index) Checkpoint() int { return len(ix.journal) }

// Rollback undoes every assign and release since the checkpoint.
func (ix *Index) Rollback(cp int) {
	for len(ix.journal) > cp {
		e := ix.journal[len(ix.journal)-1]
		switch {
		case e.milli > 0 && e.assign:
			ix.releaseShare(e.node, e.mask, e.milli, e.inst, e.cpu, e.mem)
		case e.milli > 0:
			ix.assignShare(e.node, e.mask, e.milli, e.inst, e.cpu, e.mem)
		case e.assign:
			ix.release(e.node, e.mask, e.cpu, e.mem)
		default:
			ix.assign(e.node, e.mask, e.cpu, e.mem)
		}
		ix.journal = ix.journal[:len(ix.journal)-2]
	}
}

// Commit forgets the journal up to now; rollbacks can no longer cross it.
func (ix *Index) Commit() { ix.journal = ix.journal[:0] }

// Assign records an allocation that already exists (for example one the
// simulator's other policies chose) in the index.
func (ix *Index) Assign(a model.Allocation) bool {
	i, ok := ix.byID[a.NodeID]
	if ok && a.GPUMilli > 0 {
		if a.GPUs.Count() != 1 || ix.freeMilli(i, a.GPUs) < a.GPUMilli {
			return false
		}
		ix.assignShare(i, a.GPUs, a.GPUMilli, a.MIGInstance, a.CPUMilli, a.MemoryMiB)
		return true
	}
	if !ok || ix.nodes[i].free&a.GPUs != a.GPUs {
		return false
	}
	ix.assign(i, a.GPUs, a.CPUMilli, a.MemoryMiB)
	return true
}

// Release returns an allocation's GPUs, cpu and memory to the index.
func (ix *Index) Release(a model.Allocation) bool {
	i, ok := ix.byID[a.NodeID]
	if !ok {
		return false
	}
	if a.GPUMilli > 0 {
		ix.releaseShare(i, a.GPUs, a.GPUMilli, a.MIGInstance, a.CPUMilli, a.MemoryMiB)
		return true
	}
	ix.release(i, a.GPUs, a.CPUMilli, a.MemoryMiB)
	return true
}

// byPodThenID orders nodes by (pod, id): the order every tie breaks in.
func byPodThenID(nodes []model.Node) []*model.Node {
	sorted := make([]*model.Node, len(nodes))
	for i := range nodes {
		sorted[i] = &nodes[i]
	}
	sort.Slice(sorted, func(a, b int) bool {
		if sorted[a].Pod != sorted[b].Pod {
			return sorted[a].Pod < sorted[b].Pod
		}
		return sorted[a].ID < sorted[b].ID
	})
	return sorted
}
