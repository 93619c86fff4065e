package sim

import (
	"math/rand"
	"strings"

	"github.com/berthsched/berth/internal/sched"
)

// packState is the cluster during one packing run.
type packState struct {
	nodes []PackNode
	free  [][]int // per node, per GPU: free milli
	// views are the nodes as the share placer sees them (free CPU and
	// memory, and free above), kept with each bind: the baselines test
	// every node for every pod, and building a view and a request for
	// each test was over a third of their time (BenchmarkPackingBestFit).
	views []sched.ShareNode
	rank  []int // the seed's tie-break order: lower wins
	r     *rand.Rand
	// version counts each node's changes; scores cached per (node, pod
	// type) are valid while it stands.
	version []int
	types   map[packType]int
	// freeByModel is the free GPU milli of each GPU model, fleet-wide.
	freeByModel map[string]int64
}

// packType is what a node's score for a pod depends on besides the node.
type packType struct {
	cpu, mem int64
	num, gpu int
	models   string
}

func newPackState(nodes []PackNode, seed int64) *packState {
	s := &packState{nodes: nodes,
		free: make([][]int, len(nodes)), views: make([]sched.ShareNode, len(nodes)), rank: make([]int, len(nodes)), r: rand.New(rand.NewSource(seed ^ 0x5eed)),
		version: make([]int, len(nodes)), types: map[packType]int{}, freeByModel: map[string]int64{}}
	for i, n := range nodes {
		s.free[i] = make([]int, n.GPUs)
		for g := range s.free[i] {
			s.free[i][g] = 1000
		}
		s.freeByModel[n.Model] += int64(n.GPUs) * 1000
		s.views[i] = sched.ShareNode{Model: n.Model, CPUFree: n.CPUMilli, MemFree: n.MemoryMiB, Free: s.free[i]}
	}
	// The reference simulator prefixes node names with a seed-dependent
	// random string and breaks ties by name: a random fixed order.
	for i, j := range s.r.Perm(len(nodes)) {
		s.rank[i] = j
	}
	return s
}

// view is node n as the share placer sees it.
func (s *packState) view(n int) sched.ShareNode { return s.views[n] }

// fits reports whether pod p fits node n as it is: the experiment's
// feasibility test is the product's (sched.ShareFits).
func (s *packState) fits(n int, p PackPod) bool {
	r := shareRequest(p)
	return s.fitsReq(n, &r)
}

// fitsReq is fits for a request built once for the walk over the nodes.
func (s *packState) fitsReq(n int, r *sched.ShareRequest) bool {
	return sched.ShareFits(&s.views[n], r)
}

// wholeGPUs are the lowest-index fully free GPUs a multi-GPU pod takes.
func (s *packState) wholeGPUs(n, k int) []int {
	var out []int
	for g, f := range s.free[n] {
		if f == 1000 && len(out) < k {
			out = append(out, g)
		}
	}
	return out
}

// tightestGPU is the GPU with the least free milli that still fits,
// lowest index on ties.
func (s *packState) tightestGPU(n, milli int) int {
	best := -1
	for g, f := range s.free[n] {
		if f >= milli && (best < 0 || f < s.free[n][best]) {
			best = g
		}
	}
	return best
}

// typeOf interns a pod's type.
func (s *packState) typeOf(p PackPod) int {
	k := packType{p.CPUMilli, p.MemoryMiB, p.NumGPU, p.GPUMilli, strings.Join(p.Models, "|")}
	id, ok := s.types[k]
	if !ok {
		id = len(s.types)
		s.types[k] = id
	}
	return id
}

func (s *packState) bind(n int, p PackPod, gpus []int) {
	s.version[n]++
	s.views[n].CPUFree -= p.CPUMilli
	s.views[n].MemFree -= p.MemoryMiB
	for _, g := range gpus {
		if p.Sharing() {
			s.free[n][g] -= p.GPUMilli
		} else {
			s.free[n][g] = 0
		}
	}
	s.freeByModel[s.nodes[n].Model] -= p.Demand()
}

// packPolicy picks a node and GPUs for a pod, or returns -1.
type packPolicy interface {
	choose(s *packState, p PackPod) (int, []int)
}

// RunPacking places the workload pod by pod with one policy and returns
// the unallocated-GPU curve up to maxPct % arrived.
func RunPacking(nodes []PackNode, list []PackPod, pol packPolicy, seed int64, maxPct int) PackingResult {
	s := newPackState(nodes, seed)
	var capacity float64
	for _, n := range nodes {
		capacity += float64(n.GPUs) * 1000
	}
	var arrivedMilli, allocMilli int64
	arrived := make([]int, 0, len(list))
	alloc := make([]float64, 0, len(list))
	res := PackingResult{}
	for _, p := range list {
		arrivedMilli += p.Demand()
		if n, gpus := pol.choose(s, p); n >= 0 {
			s.bind(n, p, gpus)
			allocMilli += p.Demand()
			res.Placed++
		} else {
			res.Failed++
		}
		arrived = append(arrived, roundHalfEven(100*float64(arrivedMilli)/capacity))
		alloc = append(alloc, 100*float64(allocMilli)/capacity)
	}
	res.Unallocated = packMetric(arrived, alloc, maxPct)
	return res
}

// nodeScorer scores one node for one pod: higher wins, and for a fraction
// the GPU to use.
type nodeScorer interface {
	score(s *packState, n int, p PackPod) (float64, int)
}

// fleetScorer is a scorer with a term that depends on the fleet as well
// as the node (berth's reserve for scarce GPU models): added to the
// cached score at each comparison, never cached itself.
type fleetScorer interface {
	fleet(s *packState, n int, p PackPod) float64
}

// cached turns a scorer into a policy that remembers each node's score
// per pod type until the node changes: a placement changes one node, so
// almost every score is reused. Ties go to the seed's node order.
type cached struct {
	sc    nodeScorer
	memo  [][]cacheEntry // per pod type, per node: one pod walks one row
	state *packState
}

type cacheEntry struct {
	score   float64
	version int32 // node version + 1; 0: never scored
	gpu     int16
	ok      bool
}

func (c *cached) choose(s *packState, p PackPod) (int, []int) {
	if c.state != s {
		c.state, c.memo = s, nil
	}
	t := s.typeOf(p)
	for len(c.memo) <= t {
		c.memo = append(c.memo, make([]cacheEntry, len(s.nodes)))
	}
	row := c.memo[t]
	fs, _ := c.sc.(fleetScorer)
	best, bestGPU := -1, -1
	var bestScore float64
	for n := range row {
		e := &row[n]
		if v := int32(s.version[n] + 1); e.version != v {
			*e = cacheEntry{version: v, ok: s.fits(n, p)}
			if e.ok {
				var g int
				e.score, g = c.sc.score(s, n, p)
				e.gpu = int16(g)
			}
		}
		if !e.ok {
			continue
		}
		sc := e.score
		if fs != nil {
			sc += fs.fleet(s, n, p)
		}
		if best < 0 || sc > bestScore || sc == bestScore && s.rank[n] < s.rank[best] {
			best, bestScore, bestGPU = n, sc, int(e.gpu)
		}
	}
	if best < 0 {
		return -1, nil
	}
	if p.Sharing() && bestGPU >= 0 {
		return best, []int{bestGPU}
	}
	return best, s.gpusFor(best, p)
}

// perNode keeps one figure per node of a run while the node stands (its
// version unchanged): a scorer's cost of the node before a placement,
// the same for every pod type that rescores the node after it changed.
type perNode struct {
	state *packState
	ver   []int // node version + 1; 0: never computed
	val   []float64
}

// get is node n's figure, computed by f when the node changed since.
func (c *perNode) get(s *packState, n int, f func() float64) float64 {
	if c.state != s {
		c.state, c.ver, c.val = s, make([]int, len(s.nodes)), make([]float64, len(s.nodes))
	}
	if c.ver[n] != s.version[n]+1 {
		c.ver[n], c.val[n] = s.version[n]+1, f()
	}
	return c.val[n]
}
