package sched

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/berthsched/berth/internal/model"
)

// gpuOf is the index of the one GPU in a share's mask.
func gpuOf(mask model.GPUMask) int { return bits.TrailingZeros64(uint64(mask)) }

// addShare records a share while building the index (no journal, no
// relinking: NewIndex links every node once at the end). inst is its MIG
// instance (from 1), 0 when none was recorded.
func (ix *Index) addShare(i int, mask model.GPUMask, milli, inst int) {
	ns := &ix.nodes[i]
	if ix.shared == nil {
		ix.shared = map[int][]int{}
	}
	used := ix.shared[i]
	if used == nil {
		used = make([]int, ns.node.GPUs)
		ix.shared[i] = used
	}
	g := gpuOf(mask)
	if g >= len(used) {
		return
	}
	if used[g] == 0 {
		ns.free &^= mask
		ns.addShape(1, 1)
	}
	used[g] += milli
	if ns.node.Partitioned(g) {
		if ix.migShares == nil {
			ix.migShares = map[[2]int][]migShare{}
		}
		ix.migShares[[2]int{i, g}] = append(ix.migShares[[2]int{i, g}], migShare{milli, inst})
	}
}

// migShare is a share on a MIG-partitioned GPU and the instance it holds.
type migShare struct{ milli, inst int }

// migInstance is one of a GPU's MIG instances: its milli, its number
// (from 1) in the node's layout, and its profile where the node names it.
type migInstance struct {
	milli, num int
	prof       string
}

// migFreeInstances lists the free MIG instances of GPU g on node i,
// smallest first. A share holds the instance its allocation names; the
// agent runs it there and it stays there, so the table and the node agree
// on which instances are free. A share naming none (or one the layout no
// longer has, after a repartition), largest first, takes the smallest
// instance left that holds it, and if none does the largest, so as not
// to promise what is not there.
func (ix *Index) migFreeInstances(i, g int) []migInstance {
	node := ix.nodes[i].node
	layout := node.MIG[g]
	free := make([]migInstance, len(layout))
	for k, m := range layout {
		free[k] = migInstance{m, k + 1, node.MIGProfile(g, k)}
	}
	slices.SortStableFunc(free, func(a, b migInstance) int { return a.milli - b.milli })
	var loose []int
	for _, sh := range ix.migShares[[2]int{i, g}] {
		k := slices.IndexFunc(free, func(m migInstance) bool { return m.num == sh.inst })
		if sh.inst == 0 || k < 0 {
			loose = append(loose, sh.milli)
			continue
		}
		free = slices.Delete(free, k, k+1)
	}
	slices.Sort(loose)
	for k := len(loose) - 1; k >= 0 && len(free) > 0; k-- {
		j := slices.IndexFunc(free, func(m migInstance) bool { return m.milli >= loose[k] })
		if j < 0 {
			j = len(free) - 1
		}
		free = slices.Delete(free, j, j+1)
	}
	return free
}

// migFree is migFreeInstances as milli, smallest first.
func (ix *Index) migFree(i, g int) []int {
	free := ix.migFreeInstances(i, g)
	out := make([]int, len(free))
	for k, m := range free {
		out[k] = m.milli
	}
	return out
}

// migPick is the instance a share of milli takes on GPU g of node i: the
// smallest free one that holds it, of profile prof when that is set (0
// when the GPU is not partitioned).
func (ix *Index) migPick(i, g, milli int, prof string) int {
	if !ix.nodes[i].node.Partitioned(g) {
		return 0
	}
	for _, m := range ix.migFreeInstances(i, g) {
		if m.milli >= milli && (prof == "" || m.prof == prof) {
			return m.num
		}
	}
	return 0
}

// freeMilli is what a GPU has left for shares: 1000 when free, the rest
// when shared, 0 when held whole or unusable.
func (ix *Index) freeMilli(i int, mask model.GPUMask) int {
	ns := &ix.nodes[i]
	g := gpuOf(mask)
	switch {
	case g >= ns.node.GPUs || ns.usable&mask == 0:
		return 0
	case ns.node.Partitioned(g):
		// A share runs on one instance: the most it can have is the
		// largest free one. Held whole, it has none.
		if ns.free&mask == 0 && (ix.shared[i] == nil || ix.shared[i][g] == 0) {
			return 0
		}
		if free := ix.migFree(i, g); len(free) > 0 {
			return free[len(free)-1]
		}
		return 0
	case ns.free&mask != 0:
		return 1000
	case ix.shared[i] != nil && ix.shared[i][g] > 0:
		return 1000 - ix.shared[i][g]
	}
	return 0
}

// assignShare takes milli of one GPU (and cpu, memory) on node i, on MIG
// instance inst when the GPU is partitioned.
func (ix *Index) assignShare(i int, mask model.GPUMask, milli, inst int, cpu, mem int64) {
	ix.changes++
	ix.unlink(i)
	ix.addShare(i, mask, milli, inst)
	ns := &ix.nodes[i]
	ns.cpu -= cpu
	ns.mem -= mem
	ix.link(i)
	ix.journal = append(ix.journal, journalEntry{i, mask, cpu, mem, true, milli, inst})
}

// releaseShare gives back what assignShare took; the GPU is whole-free
// again when its last share leaves.
func (ix *Index) releaseShare(i int, mask model.GPUMask, milli, inst int, cpu, mem int64) {
	ix.changes++
	ix.unlink(i)
	ns := &ix.nodes[i]
	if used := ix.shared[i]; used != nil {
		g := gpuOf(mask)
		if g < len(used) && used[g] > 0 {
			if k := [2]int{i, g}; ns.node.Partitioned(g) {
				if j := slices.Index(ix.migShares[k], migShare{milli, inst}); j >= 0 {
					ix.migShares[k] = slices.Delete(ix.migShares[k], j, j+1)
				}
			}
			used[g] -= milli
			if used[g] <= 0 {
				used[g] = 0
				ns.free |= mask & ns.usable
				ns.addShape(1, -1)
			}
		}
	}
	ns.cpu += cpu
	ns.mem += mem
	ix.link(i)
	ix.journal = append(ix.journal, journalEntry{i, mask, cpu, mem, false, milli, inst})
}

// SetMix sets the demand mix the share placer measures against.
func (ix *Index) SetMix(m ShareMix) {
	ix.placer = nil
	if len(m) > 0 {
		ix.placer = NewSharePlacer(m)
	}
}

// shareNode is node i as the share placer sees it. A MIG-partitioned GPU
// shows its largest free instance, and its free instances besides.
func (ix *Index) shareNode(i int, buf []int) ShareNode {
	ns := &ix.nodes[i]
	free := buf[:ns.node.GPUs]
	var mig [][]int
	var profs [][]string
	for g := range free {
		free[g] = ix.freeMilli(i, model.GPUMask(1)<<uint(g))
		if ns.node.Partitioned(g) {
			if mig == nil {
				mig = make([][]int, ns.node.GPUs)
				profs = make([][]string, ns.node.GPUs)
			}
			mig[g], profs[g] = []int{}, []string{}
			if free[g] > 0 {
				for _, m := range ix.migFreeInstances(i, g) {
					mig[g] = append(mig[g], m.milli)
					profs[g] = append(profs[g], m.prof)
				}
			}
		}
	}
	return ShareNode{Model: ns.node.Model, CPUFree: ns.cpu, MemFree: ns.mem, Free: free, MIG: mig, MIGProfiles: profs}
}

// bestShareNode scores, with the pool's share placer (the reserve for
// scarce models included), every node of the pool that candidate accepts,
// and returns the best and the GPU the placer chose there (-1, -1 if
// none). Ties keep the first.
func (ix *Index) bestShareNode(pool string, r ShareRequest, candidate func(i int, n ShareNode) bool) (int, int) {
	placer := ix.placer
	if placer == nil {
		placer = NewSharePlacer(ShareMix{{CPUMilli: r.CPUMilli, MemoryMiB: r.MemoryMiB, GPUs: r.GPUs, GPUMilli: r.GPUMilli, Models: r.Models, P: 1}})
	}
	var buf [model.MaxGPUsPerNode]int
	best, bestGPU := -1, -1
	var bestScore float64
	seen := seenStates{}
	byModel := ix.freeByModel(pool, placer)
	for i := range ix.nodes {
		ns := &ix.nodes[i]
		if ns.node.Pool != pool || !ns.eligible {
			continue
		}
		n := ix.shareNode(i, buf[:])
		if !candidate(i, n) || seen.dup(n) {
			continue
		}
		sc, g := placer.Score(n, r)
		sc -= placer.Reserve(n.Model, byModel[n.Model], r)
		if best < 0 || sc > bestScore {
			best, bestGPU, bestScore = i, g, sc
		}
	}
	return best, bestGPU
}

// placeShared places a share of one GPU in the sharing pool, where the
// share placer (SharePlacer) picks the node and the GPU.
func (ix *Index) placeShared(req *model.Request, pools Pools, opts placeOpts) (Placement, *Reason) {
	pool := pools.SharingPool()
	sreq := ShareRequest{CPUMilli: req.CPUMilli, MemoryMiB: req.MemoryMiB, GPUs: 1, GPUMilli: req.GPUMilli, Models: req.Models,
		Profile: req.MIGProfile}
	members, most, mostAt, mostMIG := 0, 0, "", false
	profiles, profilesFree := 0, 0 // instances of the profile asked for, and free ones with the cpu and memory
	best, bestGPU := ix.bestShareNode(pool, sreq, func(i int, n ShareNode) bool {
		if opts.exclude[i] {
			return false
		}
		members++
		if !req.AcceptsModel(n.Model) {
			return false
		}
		for g, f := range n.Free {
			if f > most && n.CPUFree >= sreq.CPUMilli && n.MemFree >= sreq.MemoryMiB {
				most, mostAt, mostMIG = f, fmt.Sprintf("%s GPU %d", ix.nodes[i].node.ID, g), n.partitioned(g)
			}
		}
		if sreq.Profile != "" {
			profiles += countProfile(ix.nodes[i].node.MIGProfiles, sreq.Profile)
			if n.CPUFree >= sreq.CPUMilli && n.MemFree >= sreq.MemoryMiB {
				profilesFree += countProfile(n.MIGProfiles, sreq.Profile)
			}
		}
		return ShareFits(&n, &sreq)
	})
	if best < 0 {
		if members == 0 {
			return Placement{}, &Reason{Code: ReasonUnschedulable, Constraint: "pool",
				Message: fmt.Sprintf("needs %d milli of one GPU in the sharing pool %q, which has no schedulable node (agents join it with --pool %s)", req.GPUMilli, pool, pool)}
		}
		if sreq.Profile != "" {
			return Placement{}, &Reason{Code: ReasonUnschedulable, Constraint: "mig_profile",
				Message: fmt.Sprintf("needs a free MIG instance of profile %s in the sharing pool %q; it has %d of them, %d free with the cpu and memory asked",
					sreq.Profile, pool, profiles, profilesFree)}
		}
		where := at(mostAt)
		if mostMIG {
			where = " (" + mostAt + ": its largest free MIG instance)"
		}
		return Placement{}, &Reason{Code: ReasonUnschedulable, Constraint: "gpu_milli", BestAt: mostAt,
			Message: fmt.Sprintf("needs %d milli of one GPU in the sharing pool %q; the most free on one GPU there (with the cpu and memory asked) is %d%s",
				req.GPUMilli, pool, most, where)}
	}
	mask := model.GPUMask(1) << uint(bestGPU)
	inst := ix.migPick(best, bestGPU, req.GPUMilli, req.MIGProfile)
	ix.assignShare(best, mask, req.GPUMilli, inst, req.CPUMilli, req.MemoryMiB)
	return Placement{Pool: pool, Parts: []Part{{Node: ix.nodes[best].node.ID, GPUs: mask, GPUMilli: req.GPUMilli, MIGInstance: inst,
		CPUMilli: req.CPUMilli, MemoryMiB: req.MemoryMiB}}}, nil
}

// countProfile is how many of a node's MIG instances (per GPU, by
// profile) are of profile p.
func countProfile(byGPU [][]string, p string) int {
	n := 0
	for _, names := range byGPU {
		for _, name := range names {
			if name == p {
				n++
			}
		}
	}
	return n
}

// placeSharing puts a whole-GPU request routed to the sharing pool (as
// the pool for small work, say) on one node, chosen by the share placer
// as it chooses for a share: the node whose cost grows least against the
// pool's mix. This is how the packing benchmark's berth policy places
// whole-GPU tasks too; the R1 index, which knows nothing of shares, CPU
// balance or the mix, is not asked.
func (pl *placer) placeSharing(pool string) bool {
	ix, req, k := pl.ix, pl.req, pl.req.GPUs
	sreq := ShareRequest{CPUMilli: req.CPUMilli, MemoryMiB: req.MemoryMiB, GPUs: k, GPUMilli: 1000, Models: req.Models}
	best, _ := ix.bestShareNode(pool, sreq, func(i int, n ShareNode) bool {
		return ix.wholeForShared(i).Count() >= k && req.AcceptsModel(n.Model) && pl.fit(i, k)
	})
	if best < 0 {
		return false
	}
	pl.takeFrom(best, k, ix.wholeForShared(best))
	return true
}

// wholeForShared is node i's free GPUs a whole-GPU job in the sharing
// pool may take: the MIG-partitioned ones are left to shares, which is
// what the operator partitioned them for.
func (ix *Index) wholeForShared(i int) model.GPUMask {
	ns := &ix.nodes[i]
	free := ns.free
	for g := range ns.node.MIG {
		if ns.node.Partitioned(g) {
			free &^= model.GPUMask(1) << uint(g)
		}
	}
	return free
}

// freeWhole is node i's free GPUs a whole-GPU request may take: on a
// sharing-pool node, not its MIG-partitioned ones (placeSharing's rule),
// which the operator set aside for shares.
func (ix *Index) freeWhole(i int, pools Pools) model.GPUMask {
	if ix.nodes[i].node.Pool == pools.SharingPool() {
		return ix.wholeForShared(i)
	}
	return ix.nodes[i].free
}

// freeByModel is the pool's free GPU milli by GPU model, what the reserve
// for scarce models weighs against (share_reserve.go); nil when no demand
// in the mix is pinned to a model.
func (ix *Index) freeByModel(pool string, placer *SharePlacer) map[string]int64 {
	if !placer.Scarce() {
		return nil
	}
	out := map[string]int64{}
	for i := range ix.nodes {
		ns := &ix.nodes[i]
		if ns.node.Pool != pool || !ns.eligible {
			continue
		}
		for g := range ns.node.GPUs {
			out[ns.node.Model] += int64(ix.freeMilli(i, model.GPUMask(1)<<uint(g)))
		}
	}
	return out
}

// nodeStateKey is what a share score depends on: the model, free CPU and
// memory, and the free milli of the GPUs as a multiset (sorted, each +1
// so that a GPU with none free differs from no GPU). Nodes with more GPUs
// than the key holds are not keyed.
type nodeStateKey struct {
	model    string
	cpu, mem int64
	free     [16]int16
}

// seenStates are the node states a scan has scored.
type seenStates map[nodeStateKey]bool

// dup reports whether a node in the same state was scored already in this
// scan. It then scored the same, and being earlier keeps the tie, so the
// later one need not be scored: an idle fleet is mostly one state.
func (seen seenStates) dup(n ShareNode) bool {
	if len(n.Free) > 16 || n.MIG != nil {
		return false
	}
	k := nodeStateKey{model: n.Model, cpu: n.CPUFree, mem: n.MemFree}
	for g, f := range n.Free {
		k.free[g] = int16(f + 1)
	}
	slices.Sort(k.free[:len(n.Free)])
	if seen[k] {
		return true
	}
	seen[k] = true
	return false
}

func at(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// shareMix is the demand of the sharing pool as the table has it: every
// share running or wanted, and the one-GPU jobs and replicas beside them.
// Nil when nothing asks for a share (the placer then needs no mix).
func shareMix(s *State) ShareMix {
	frac := false
	for i := range s.Jobs {
		frac = frac || s.Jobs[i].Shape.Fraction() && !s.Jobs[i].State.Terminal()
	}
	for i := range s.Deployments {
		frac = frac || s.Deployments[i].ReplicaShape.Fraction()
	}
	if !frac {
		return nil
	}
	// A deployment counts once per replica it wants, but never for more
	// replicas than the fleet could hold: the pass costs what the fleet
	// is, not what a tenant typed (max_replicas 1e9 once made this loop,
	// and every pass, take 1.8 s).
	gpus := 0
	for i := range s.Nodes {
		gpus += s.Nodes[i].GPUs
	}
	var reqs []ShareRequest
	add := func(sh model.Shape, n int) {
		if sh.GPUs != 1 || sh.Topology != model.TopologyNode {
			return
		}
		milli := sh.GPUMilli
		if milli == 0 {
			milli = 1000
		}
		limit := 1 << 24 // an empty State (tests): only overflow to guard
		if gpus > 0 {
			limit = max(gpus*1000/milli, 1)
		}
		n = min(max(n, 1), limit)
		reqs = append(reqs, ShareRequest{CPUMilli: sh.CPUMilli, MemoryMiB: sh.MemoryMiB, GPUs: 1, GPUMilli: milli, Models: sh.Models, Count: n})
	}
	for i := range s.Jobs {
		if !s.Jobs[i].State.Terminal() {
			add(s.Jobs[i].Shape, 1)
		}
	}
	for i := range s.Deployments {
		add(s.Deployments[i].ReplicaShape, s.Deployments[i].Target())
	}
	return MixOf(reqs)
}
