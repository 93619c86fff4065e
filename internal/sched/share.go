package sched

import (
	"slices"
	"sort"
)

// Sharing pools hold the long tail: fractions of a GPU (MPS or MIG) for
// notebooks and small inference, and the small whole-GPU jobs beside them
// (§9.5). Topology does not matter there; fragmentation does, in three
// dimensions at once: GPU milli, CPU and memory. A node whose GPUs are
// free but whose CPUs are gone strands those GPUs as surely as a GPU with
// 300 milli free strands a 500-milli task.
//
// The share placer scores a candidate by how much the placement grows the
// node's cost against the demand the fleet actually sees. First, the GPU
// value the placement throws away: under the LP prices of the mix's
// fraction sizes, what the GPU could still have held beyond the share
// (share_value.go). Then FGD's fragmentation (Weng et al., ATC 2023: free
// milli that one more request of each type could not use) plus the milli
// stranded by CPU and memory (free milli that a run of requests of each
// type could not use). The mix keeps the rare multi-GPU types, so
// breaking a whole node costs something. Callers also subtract the
// reserve for scarce GPU models (share_reserve.go), which depends on the
// pool's free GPUs, not on the node alone. On Alibaba's openb trace and
// its variants this leaves far less GPU capacity stranded than FGD
// itself; BENCHMARKS.md has the figures and docs/sharing.md the method.

// ShareType is one kind of request in the demand mix and its frequency.
type ShareType struct {
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int // whole GPUs; 1 with GPUMilli < 1000 for a fraction
	GPUMilli  int // per GPU: 1000 for whole GPUs, 0 for none
	Models    []string
	P         float64
}

// ShareMix is the demand the placer measures fragmentation against: the
// most common request types, covering 95% of requests, frequencies
// normalised to 1.
type ShareMix []ShareType

// ShareRequest is what one placement asks for.
type ShareRequest struct {
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int
	GPUMilli  int // < 1000: a fraction of one GPU
	Models    []string
	// Profile, when set, is the MIG profile the share must run on: only
	// a free instance of that name holds it (model.Shape.MIGProfile).
	Profile string
	// Count is how many requests of this shape this stands for (a
	// deployment's replicas); 0 is one.
	Count int
}

func (r ShareRequest) count() int { return max(r.Count, 1) }

// Fraction reports whether the request is a fraction of one GPU.
func (r ShareRequest) Fraction() bool { return r.GPUs == 1 && r.GPUMilli > 0 && r.GPUMilli < 1000 }

// ShareNode is a candidate node as the share placer sees it.
type ShareNode struct {
	Model   string
	CPUFree int64
	MemFree int64
	// Free is each GPU's free milli: 1000 for a free GPU, less for a
	// shared one, 0 for one held whole (or quarantined). For a
	// MIG-partitioned GPU it is the largest free instance.
	Free []int
	// MIG, when set, lists per GPU the free MIG instances (milli,
	// smallest first) of the partitioned ones, nil for the others: a
	// share takes a whole instance, the smallest that holds it.
	MIG [][]int
	// MIGProfiles names MIG's instances, in the same order, where the
	// node names them.
	MIGProfiles [][]string
}

// holds reports whether GPU g can take share r: enough free milli and,
// for a share that names a MIG profile, one free instance of it that
// holds the share (a free 2g beside a free 4g does not hold 500m as a
// 2g).
func (n ShareNode) holds(g int, r ShareRequest) bool {
	if n.Free[g] < r.GPUMilli {
		return false
	}
	if r.Profile == "" {
		return true
	}
	if g >= len(n.MIGProfiles) {
		return false
	}
	for k, p := range n.MIGProfiles[g] {
		if p == r.Profile && n.MIG[g][k] >= r.GPUMilli {
			return true
		}
	}
	return false
}

// partitioned reports whether GPU g is MIG-partitioned.
func (n ShareNode) partitioned(g int) bool { return g < len(n.MIG) && n.MIG[g] != nil }

// afterShare is GPU g's Free once share r is placed on it.
func (n ShareNode) afterShare(g int, r ShareRequest) int {
	if !n.partitioned(g) {
		return n.Free[g] - r.GPUMilli
	}
	largest, taken := 0, false
	for k, m := range n.MIG[g] { // smallest first: the first that holds it is taken
		if !taken && m >= r.GPUMilli && (r.Profile == "" || n.MIGProfiles[g][k] == r.Profile) {
			taken = true
			continue
		}
		largest = max(largest, m)
	}
	return largest
}

// TypicalMix is FGD's "typical pods": request types by (cpu, GPUs,
// milli, models), the most frequent first, until 95% of requests are
// covered, frequencies renormalised over those. Memory is the type's mean.
func TypicalMix(reqs []ShareRequest) ShareMix {
	mix, _ := typicalMix(reqs)
	return mix
}

// MixOf is the demand mix the share placer measures against: the typical
// mix, plus every multi-GPU type however rare, at its share of all
// requests. Multi-GPU requests are few by count and large by demand (on
// openb 0.9% of requests and 5.8% of GPU demand); left out, nothing would
// value a node kept whole for them.
func MixOf(reqs []ShareRequest) ShareMix {
	mix, types := typicalMix(reqs)
	total := 0
	for _, r := range reqs {
		total += r.count()
	}
	for _, t := range types[len(mix):] {
		if t.GPUs > 1 {
			t.P /= float64(total)
			mix = append(mix, t)
		}
	}
	return mix
}

// typicalMix returns the typical mix and every type, the most frequent
// first, with P the type's count (the first len(mix) are the mix).
func typicalMix(reqs []ShareRequest) (ShareMix, []ShareType) {
	type key struct {
		cpu       int64
		gpus, gpu int
		models    string
	}
	count := map[key]int{}
	mem := map[key]int64{}
	models := map[key][]string{}
	total := 0
	for _, r := range reqs {
		k := key{r.CPUMilli, r.GPUs, r.GPUMilli, modelsKey(r.Models)}
		count[k] += r.count()
		mem[k] += r.MemoryMiB * int64(r.count())
		models[k] = r.Models
		total += r.count()
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if count[a] != count[b] {
			return count[a] > count[b]
		}
		if a.cpu != b.cpu {
			return a.cpu < b.cpu
		}
		if a.gpus != b.gpus {
			return a.gpus < b.gpus
		}
		if a.gpu != b.gpu {
			return a.gpu < b.gpu
		}
		return a.models < b.models
	})
	types := make([]ShareType, len(keys))
	n, covered := 0, 0
	for i, k := range keys {
		types[i] = ShareType{CPUMilli: k.cpu, MemoryMiB: mem[k] / int64(count[k]), GPUs: k.gpus, GPUMilli: k.gpu,
			Models: models[k], P: float64(count[k])}
		if float64(covered) < 0.95*float64(total) {
			covered += count[k]
			n++
		}
	}
	if n == 0 {
		return nil, types
	}
	mix := slices.Clone(types[:n])
	for i := range mix {
		mix[i].P /= float64(covered)
	}
	return mix, types
}

func modelAllowed(models []string, model string) bool {
	return len(models) == 0 || slices.Contains(models, model)
}

// ShareFits reports whether the request fits the node as it is. It takes
// both by pointer: the packing experiment's baselines ask it of every
// node for every pod, and the two structs are a hundred bytes each.
func ShareFits(n *ShareNode, r *ShareRequest) bool {
	if r.CPUMilli > n.CPUFree || r.MemoryMiB > n.MemFree {
		return false
	}
	if r.GPUs == 0 {
		return true
	}
	if !modelAllowed(r.Models, n.Model) {
		return false
	}
	if r.Fraction() {
		for g := range n.Free {
			if n.holds(g, *r) {
				return true
			}
		}
		return false
	}
	whole := 0
	for _, f := range n.Free {
		if f == 1000 {
			whole++
		}
	}
	return whole >= r.GPUs
}

// SharePlacer scores placements in a sharing pool against a demand mix:
// the mix, and what a shared GPU's free milli is worth under it
// (share_value.go). Build one per mix; it is read-only after.
type SharePlacer struct {
	Mix   ShareMix
	value gapValue
	claim map[string]float64 // share_reserve.go
}

// NewSharePlacer is the placer for a mix.
func NewSharePlacer(mix ShareMix) *SharePlacer {
	return &SharePlacer{Mix: mix, value: gapValuesOf(mix), claim: claims(mix)}
}

// Score scores placing r on n: higher is better, by how little GPU value
// a fraction spends (valueWeight × gapValue.spent) and then by how little
// the placement grows the node's Cost. For a fraction it also returns the
// GPU to use (every GPU that fits is tried, ties to the tightest); whole
// GPUs are the lowest-index free ones (gpu −1). The caller has checked
// ShareFits.
func (p *SharePlacer) Score(n ShareNode, r ShareRequest) (float64, int) {
	return p.ScoreFrom(n, r, p.Cost(n))
}

// ScoreFrom is Score with the node's Cost as it stands already known (it
// is the same for every request until the node changes).
func (p *SharePlacer) ScoreFrom(n ShareNode, r ShareRequest, before float64) (float64, int) {
	var buf [64]int // a node has at most 64 GPUs: no allocation per score
	after := ShareNode{Model: n.Model, CPUFree: n.CPUFree - r.CPUMilli, MemFree: n.MemFree - r.MemoryMiB,
		Free: buf[:len(n.Free)]}
	if !r.Fraction() {
		copy(after.Free, n.Free)
		for _, g := range WholeGPUs(n.Free, r.GPUs) {
			after.Free[g] = 0
		}
		return before - p.Cost(after), -1
	}
	best, bestGPU := 0.0, -1
	var tried [64]int // the cost depends on the free values, not on which GPU: try each value once
	ntried := 0
	for g, f := range n.Free {
		if !n.holds(g, r) {
			continue
		}
		if !n.partitioned(g) {
			if slices.Contains(tried[:ntried], f) {
				continue
			}
			tried[ntried] = f
			ntried++
		}
		copy(after.Free, n.Free)
		after.Free[g] = n.afterShare(g, r)
		sc := before - p.Cost(after) - valueWeight*p.value.spent(f, f-after.Free[g])
		if bestGPU < 0 || sc > best || sc == best && f < n.Free[bestGPU] {
			best, bestGPU = sc, g
		}
	}
	return best, bestGPU
}

// WholeGPUs are the lowest-index fully free GPUs, k of them.
func WholeGPUs(free []int, k int) []int {
	var out []int
	for g, f := range free {
		if f == 1000 && len(out) < k {
			out = append(out, g)
		}
	}
	return out
}
