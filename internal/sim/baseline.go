package sim

import (
	"math/rand/v2"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// The baselines are the simple placements the design compares itself to
// (§6, §10): greedy, no reservations, no preemption, no backfill. Each pass
// places inference first, then pending training by priority and submit
// time, skipping what does not fit. They are written plainly here because
// they are not berth: berth's own placement lives only in internal/sched.

type pickRule int

const (
	pickFirst  pickRule = iota // lowest node index first
	pickWorst                  // most free GPUs first
	pickRandom                 // random order
	pickBest                   // least free GPUs that still fit first
)

type baseline struct {
	name      string
	rule      pickRule
	topoAware bool // best-fit and static-split respect `node` and `pod`
	split     bool // static-split: training gets the first half of nodes
	rng       *rand.Rand
	// pos maps node ids to positions; the fleet does not change between
	// passes, so it is built once.
	pos map[string]int
}

func newBaseline(name string, rule pickRule, topoAware, split bool, seed uint64) *baseline {
	return &baseline{name: name, rule: rule, topoAware: topoAware, split: split, rng: rand.New(rand.NewPCG(seed, 0xba5e))}
}

func (b *baseline) Name() string { return b.name }

func (b *baseline) Prepare(w *Workload) ([]model.Node, sched.Config, string) {
	nodes := append([]model.Node(nil), w.Nodes...)
	if !b.split {
		return nodes, sched.Config{}, ""
	}
	// The inference side is sized the way berth sizes its inference pool:
	// the deployments' declared max_replicas × replica GPUs (the same
	// information, given to both), at most the fleet.
	pools := sched.Pools{Training: "training", Inference: "inference"}
	labels, _ := sched.SizePools(nodes, declared(w), sched.Pools{Training: "training", Inference: "inference", InferenceMinGPUs: 1}, 0)
	for i := range nodes {
		nodes[i].Pool = labels[nodes[i].ID]
	}
	// The config only tells the measures which side a new job may use.
	return nodes, sched.Config{Pools: pools}, ""
}

// freeNode is a baseline's view of one node.
type freeNode struct {
	n        *model.Node
	free     model.GPUMask
	cpu, mem int64
}

func (b *baseline) Plan(v *View, now time.Time) sched.Decision {
	s := &v.State
	if b.pos == nil {
		b.pos = make(map[string]int, len(s.Nodes))
		for i := range s.Nodes {
			b.pos[s.Nodes[i].ID] = i
		}
	}
	pos := b.pos
	nodes := make([]freeNode, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		nodes[i] = freeNode{n: n, free: model.FullMask(n.GPUs) &^ n.QuarantinedGPUs, cpu: n.CPUMilli, mem: n.MemoryMiB}
		if !n.Schedulable() {
			nodes[i].free = 0
		}
	}
	running := map[string]bool{}
	replicas := map[string]map[int][]string{}
	for _, a := range s.Allocations {
		if i, ok := pos[a.NodeID]; ok {
			nodes[i].free &^= a.GPUs
			nodes[i].cpu -= a.CPUMilli
			nodes[i].mem -= a.MemoryMiB
		}
		if a.OwnerKind == model.OwnerInference {
			if replicas[a.OwnerID] == nil {
				replicas[a.OwnerID] = map[int][]string{}
			}
			replicas[a.OwnerID][a.Replica] = append(replicas[a.OwnerID][a.Replica], a.ID)
		} else {
			running[a.OwnerID] = true
		}
	}
	var d sched.Decision
	deps := append([]model.Deployment(nil), s.Deployments...)
	sort.SliceStable(deps, func(i, j int) bool { return deps[i].Priority > deps[j].Priority })
	for _, dep := range deps {
		have := replicas[dep.ID]
		want := dep.Target()
		for r := 0; len(have) < want; r++ {
			if _, ok := have[r]; ok {
				continue
			}
			req := model.Request{Shape: dep.ReplicaShape, Kind: model.OwnerInference, OwnerID: dep.ID, Replica: r}
			parts := b.place(nodes, &req, "inference")
			if parts == nil {
				break
			}
			if have == nil {
				have = map[int][]string{}
			}
			have[r] = nil
			d.Binds = append(d.Binds, sched.Bind{Kind: model.OwnerInference, OwnerID: dep.ID, Replica: r, Placement: sched.Placement{Parts: parts}})
		}
		if len(have) > want {
			nums := make([]int, 0, len(have))
			for r := range have {
				nums = append(nums, r)
			}
			sort.Sort(sort.Reverse(sort.IntSlice(nums)))
			for _, r := range nums[:len(have)-want] {
				d.Stops = append(d.Stops, sched.Stop{OwnerID: dep.ID, Replica: r, Allocations: have[r]})
			}
		}
	}
	var queue []*model.Job
	for i := range s.Jobs {
		if j := s.Jobs[i]; j.State == model.JobPending && !running[j.ID] {
			queue = append(queue, j)
		}
	}
	sort.SliceStable(queue, func(i, j int) bool {
		if queue[i].Priority != queue[j].Priority {
			return queue[i].Priority > queue[j].Priority
		}
		return queue[i].SubmittedAt.Before(queue[j].SubmittedAt)
	})
	for _, j := range queue {
		req := j.Request()
		if parts := b.place(nodes, &req, "training"); parts != nil {
			d.Binds = append(d.Binds, sched.Bind{Kind: model.OwnerTraining, OwnerID: j.ID, Preemptible: j.Preemptible, Placement: sched.Placement{Parts: parts}})
		}
	}
	return d
}

// place takes GPUs for req, or returns nil and takes nothing.
func (b *baseline) place(nodes []freeNode, req *model.Request, side string) []sched.Part {
	var cands []int
	for i := range nodes {
		fn := &nodes[i]
		if fn.free == 0 || !req.AcceptsModel(fn.n.Model) || (b.split && fn.n.Pool != side) {
			continue
		}
		cands = append(cands, i)
	}
	k := req.GPUs
	per := func(n int) (int64, int64) {
		return (req.CPUMilli*int64(n) + int64(k) - 1) / int64(k), (req.MemoryMiB*int64(n) + int64(k) - 1) / int64(k)
	}
	fits := func(i, n int) bool {
		c, m := per(n)
		return nodes[i].free.Count() >= n && nodes[i].cpu >= c && nodes[i].mem >= m
	}
	var plan []struct{ node, n int }
	switch {
	case b.topoAware && req.Topology == model.TopologyNode:
		// Best fit: the least free node that still fits, first on ties.
		best := -1
		for _, i := range cands {
			if fits(i, k) && (best < 0 || nodes[i].free.Count() < nodes[best].free.Count()) {
				best = i
			}
		}
		if best >= 0 {
			plan = append(plan, struct{ node, n int }{best, k})
		}
	case b.topoAware && req.Topology == model.TopologyPod:
		plan = b.packPod(nodes, cands, k, fits)
	default:
		b.order(nodes, cands, k)
		plan = greedy(nodes, cands, k, fits)
	}
	if plan == nil {
		return nil
	}
	var parts []sched.Part
	for _, p := range plan {
		fn := &nodes[p.node]
		var m model.GPUMask
		for _, g := range fn.free.Indices()[:p.n] {
			m |= model.MaskOf(g)
		}
		c, mem := per(p.n)
		fn.free &^= m
		fn.cpu -= c
		fn.mem -= mem
		parts = append(parts, sched.Part{Node: fn.n.ID, GPUs: m, CPUMilli: c, MemoryMiB: mem})
	}
	return parts
}

// order sorts candidate nodes by the policy's rule.
func (b *baseline) order(nodes []freeNode, cands []int, k int) {
	switch b.rule {
	case pickWorst:
		sort.SliceStable(cands, func(x, y int) bool { return nodes[cands[x]].free.Count() > nodes[cands[y]].free.Count() })
	case pickRandom:
		b.rng.Shuffle(len(cands), func(x, y int) { cands[x], cands[y] = cands[y], cands[x] })
	case pickBest:
		// Least remainder among nodes that can hold the whole request,
		// then the rest, most free first.
		sort.SliceStable(cands, func(x, y int) bool {
			fx, fy := nodes[cands[x]].free.Count(), nodes[cands[y]].free.Count()
			if (fx >= k) != (fy >= k) {
				return fx >= k
			}
			if fx >= k {
				return fx < fy
			}
			return fx > fy
		})
	}
}

// greedy takes GPUs from candidates in order until k: by count, blind to
// topology.
func greedy(nodes []freeNode, cands []int, k int, fits func(i, n int) bool) []struct{ node, n int } {
	var plan []struct{ node, n int }
	need := k
	for _, i := range cands {
		n := min(need, nodes[i].free.Count())
		for n > 0 && !fits(i, n) {
			n--
		}
		if n == 0 {
			continue
		}
		plan = append(plan, struct{ node, n int }{i, n})
		if need -= n; need == 0 {
			return plan
		}
	}
	return nil
}

// packPod is §6's pod rule: the tightest pod with enough free GPUs, nodes
// with the most free first.
func (b *baseline) packPod(nodes []freeNode, cands []int, k int, fits func(i, n int) bool) []struct{ node, n int } {
	byPod := map[string][]int{}
	free := map[string]int{}
	var pods []string
	for _, i := range cands {
		p := nodes[i].n.Pod
		if _, ok := byPod[p]; !ok {
			pods = append(pods, p)
		}
		byPod[p] = append(byPod[p], i)
		free[p] += nodes[i].free.Count()
	}
	sort.SliceStable(pods, func(x, y int) bool { return free[pods[x]] < free[pods[y]] })
	for _, p := range pods {
		if free[p] < k {
			continue
		}
		in := byPod[p]
		sort.SliceStable(in, func(x, y int) bool { return nodes[in[x]].free.Count() > nodes[in[y]].free.Count() })
		if plan := greedy(nodes, in, k, fits); plan != nil {
			return plan
		}
	}
	return nil
}
