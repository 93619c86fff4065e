package sched

import (
	"slices"
	"sort"
	"strings"
)

// Sharing pools hold the long tail: fractions of a GPU (MPS or MIG) for
// notebooks and small inference, and the small whole-GPU jobs beside them
// (§9.5). Topology does not matter there; fragmentation does, in three
// dimensions at once: GPU milli, CPU and memory. A node whose GPUs are
// free but whose CPUs are gone strands those GPUs as surely as a GPU with
// 300 milli free strands a 500-milli task.
//
// The share placer scores a candidate by how much the placement grows the
// node's cost against the demand the fleet actually sees: FGD's
// fragmentation (Weng et al., ATC 2023: free milli that one more request
// of each type could not use) plus the milli stranded by CPU and memory
// (free milli that a run of requests of each type could not use). The
// mix keeps the rare multi-GPU types, so breaking a whole node costs
// something. On Alibaba's openb trace this leaves less GPU capacity
// stranded than FGD itself; BENCHMARKS.md has the figures and
// docs/sharing.md the method.

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
}

// Fraction reports whether the request is a fraction of one GPU.
func (r ShareRequest) Fraction() bool { return r.GPUs == 1 && r.GPUMilli > 0 && r.GPUMilli < 1000 }

// ShareNode is a candidate node as the share placer sees it.
type ShareNode struct {
	Model   string
	CPUFree int64
	MemFree int64
	// Free is each GPU's free milli: 1000 for a free GPU, less for a
	// shared one, 0 for one held whole (or quarantined).
	Free []int
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
	for _, t := range types[len(mix):] {
		if t.GPUs > 1 {
			t.P /= float64(len(reqs))
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
	for _, r := range reqs {
		k := key{r.CPUMilli, r.GPUs, r.GPUMilli, strings.Join(r.Models, "|")}
		count[k]++
		mem[k] += r.MemoryMiB
		models[k] = r.Models
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
		if float64(covered) < 0.95*float64(len(reqs)) {
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

// ShareFits reports whether the request fits the node as it is.
func ShareFits(n ShareNode, r ShareRequest) bool {
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
		for _, f := range n.Free {
			if f >= r.GPUMilli {
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

// freeSummary is a node's free GPU milli as distinct values and how many
// GPUs have each: a node has few distinct values (most GPUs are free or
// held whole), so the per-type loops below run over a handful of entries.
type freeSummary struct {
	val, cnt     [64]int
	n            int
	total, whole int
}

func summarize(free []int) *freeSummary {
	var s freeSummary
	for _, f := range free {
		s.total += f
		if f == 1000 {
			s.whole++
		}
		i := 0
		for i < s.n && s.val[i] != f {
			i++
		}
		if i == s.n {
			s.val[i] = f
			s.n++
		}
		s.cnt[i]++
	}
	return &s
}

// Fragmentation is the node's stranded GPU milli against the mix: for
// each request type, the milli it could not use (all of it when the type
// does not fit the node at all, the GPUs with too little free when it
// does), weighted by how often the type comes.
func (m ShareMix) Fragmentation(n ShareNode) float64 { return m.fragmentation(n, summarize(n.Free)) }

func (m ShareMix) fragmentation(n ShareNode, s *freeSummary) float64 {
	var F float64
	for _, t := range m {
		need := t.GPUMilli
		if t.GPUs > 1 {
			need = 1000
		}
		fits := t.CPUMilli <= n.CPUFree && t.MemoryMiB <= n.MemFree && (t.GPUs == 0 || modelAllowed(t.Models, n.Model))
		frag := 0
		for i := range s.n {
			if s.val[i] < need {
				frag += s.val[i] * s.cnt[i]
			}
		}
		if fits && t.GPUs > 0 {
			if t.GPUs > 1 || t.GPUMilli >= 1000 {
				fits = s.whole >= t.GPUs
			} else {
				fits = s.total-frag > 0
			}
		}
		if fits {
			F += t.P * float64(frag)
		} else {
			F += t.P * float64(s.total)
		}
	}
	return F
}

// Stranded is the node's GPU milli each request type could not use if
// only that type arrived from now on, weighted by how often the type
// comes. Where Fragmentation asks whether one more request fits, Stranded
// asks how many do: a node with 8 free GPUs and 96 free cores holds six
// 1-GPU, 16-core requests, not eight, and the other two GPUs are
// stranded by CPU. This is what steers CPU-heavy work to CPU-rich nodes
// and keeps CPU-only work off CPU-poor ones. CPU counts continuously
// (a partly used core still moves the balance), memory in whole requests.
func (m ShareMix) Stranded(n ShareNode) float64 { return m.stranded(n, summarize(n.Free)) }

func (m ShareMix) stranded(n ShareNode, s *freeSummary) float64 {
	var S float64
	for _, t := range m {
		if t.GPUs == 0 {
			continue // CPU-only work uses no GPU: it strands by taking CPU
		}
		if !modelAllowed(t.Models, n.Model) {
			S += t.P * float64(s.total)
			continue
		}
		var k, per float64 // how many fit by GPU, and the milli each takes
		if t.GPUs == 1 && t.GPUMilli < 1000 {
			c := 0
			for i := range s.n {
				c += s.val[i] / t.GPUMilli * s.cnt[i]
			}
			k, per = float64(c), float64(t.GPUMilli)
		} else {
			k, per = float64(s.whole/t.GPUs), float64(t.GPUs*1000)
		}
		if t.CPUMilli > 0 {
			k = min(k, float64(n.CPUFree)/float64(t.CPUMilli))
		}
		if t.MemoryMiB > 0 {
			k = min(k, float64(n.MemFree/t.MemoryMiB))
		}
		S += t.P * (float64(s.total) - max(k, 0)*per)
	}
	return S
}

// strandWeight weighs Stranded against Fragmentation in the placer's
// cost (tuned on the openb trace; docs/sharing.md has the sweep).
const strandWeight = 0.3

// Cost is what the share placer minimises: FGD's fragmentation against
// the mix, plus the GPU milli stranded by CPU and memory.
func (m ShareMix) Cost(n ShareNode) float64 {
	s := summarize(n.Free)
	return m.fragmentation(n, s) + strandWeight*m.stranded(n, s)
}

// ShareScore scores placing r on n: higher is better, by how little the
// placement grows the node's Cost. For a fraction it also returns the GPU
// to use (every GPU that fits is tried, ties to the tightest); whole GPUs
// are the lowest-index free ones (gpu −1). The caller has checked
// ShareFits.
func ShareScore(n ShareNode, r ShareRequest, mix ShareMix) (float64, int) {
	return ShareScoreFrom(n, r, mix, mix.Cost(n))
}

// ShareScoreFrom is ShareScore with the node's Cost as it stands already
// known (it is the same for every request until the node changes).
func ShareScoreFrom(n ShareNode, r ShareRequest, mix ShareMix, before float64) (float64, int) {
	var buf [64]int // a node has at most 64 GPUs: no allocation per score
	after := ShareNode{Model: n.Model, CPUFree: n.CPUFree - r.CPUMilli, MemFree: n.MemFree - r.MemoryMiB,
		Free: buf[:len(n.Free)]}
	if !r.Fraction() {
		copy(after.Free, n.Free)
		for _, g := range WholeGPUs(n.Free, r.GPUs) {
			after.Free[g] = 0
		}
		return before - mix.Cost(after), -1
	}
	best, bestGPU := 0.0, -1
	var tried [64]int // the cost depends on the free values, not on which GPU: try each value once
	ntried := 0
	for g, f := range n.Free {
		if f < r.GPUMilli || slices.Contains(tried[:ntried], f) {
			continue
		}
		tried[ntried] = f
		ntried++
		copy(after.Free, n.Free)
		after.Free[g] -= r.GPUMilli
		sc := before - mix.Cost(after)
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
