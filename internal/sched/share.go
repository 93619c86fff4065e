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
// node's fragmentation against the demand the fleet actually sees (the
// fragmentation-gradient idea of FGD, Weng et al., ATC 2023), with memory
// in the fit test and a light best-fit pull on GPU and CPU left over. On
// Alibaba's openb trace this leaves less GPU capacity stranded than FGD
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

// MixOf builds the demand mix from requests (what runs and waits now, or a
// trace): types by (cpu, GPUs, milli, models), the most frequent first,
// until 95% of requests are covered. Memory is the type's mean.
func MixOf(reqs []ShareRequest) ShareMix {
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
	var mix ShareMix
	covered := 0
	for _, k := range keys {
		if float64(covered) >= 0.95*float64(len(reqs)) {
			break
		}
		covered += count[k]
		mix = append(mix, ShareType{CPUMilli: k.cpu, MemoryMiB: mem[k] / int64(count[k]), GPUs: k.gpus, GPUMilli: k.gpu,
			Models: models[k], P: float64(count[k])})
	}
	for i := range mix {
		mix[i].P /= float64(covered)
	}
	return mix
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

// Fragmentation is the node's stranded GPU milli against the mix: for
// each request type, the milli it could not use (all of it when the type
// does not fit the node at all, the GPUs with too little free when it
// does), weighted by how often the type comes.
func (m ShareMix) Fragmentation(n ShareNode) float64 {
	total := 0
	for _, f := range n.Free {
		total += f
	}
	var F float64
	for _, t := range m {
		need := t.GPUMilli
		if t.GPUs > 1 {
			need = 1000
		}
		fits := t.CPUMilli <= n.CPUFree && t.MemoryMiB <= n.MemFree && (t.GPUs == 0 || modelAllowed(t.Models, n.Model))
		frag, whole := 0, 0
		for _, f := range n.Free {
			if f < need {
				frag += f
			}
			if f == 1000 {
				whole++
			}
		}
		if fits && t.GPUs > 0 {
			if t.GPUs > 1 || t.GPUMilli >= 1000 {
				fits = whole >= t.GPUs
			} else {
				fits = total-frag > 0
			}
		}
		if fits {
			F += t.P * float64(frag)
		} else {
			F += t.P * float64(total)
		}
	}
	return F
}

// Best-fit pulls, per GPU milli and per CPU milli left free (tuned on the
// openb trace; see docs/sharing.md).
const (
	shareGPUPull = 0.02
	shareCPUPull = 0.01 / 16
)

// ShareScore scores placing r on n: higher is better. For a fraction it
// also returns the GPU to use (every GPU that fits is tried); whole GPUs
// are the lowest-index free ones (gpu −1). The caller has checked
// ShareFits.
func ShareScore(n ShareNode, r ShareRequest, mix ShareMix) (float64, int) {
	return ShareScoreFrom(n, r, mix, mix.Fragmentation(n))
}

// ShareScoreFrom is ShareScore with the node's fragmentation as it stands
// already known (it is the same for every request until the node changes).
func ShareScoreFrom(n ShareNode, r ShareRequest, mix ShareMix, before float64) (float64, int) {
	freeTotal := 0
	for _, f := range n.Free {
		freeTotal += f
	}
	var buf [64]int // a node has at most 64 GPUs: no allocation per score
	after := ShareNode{Model: n.Model, CPUFree: n.CPUFree - r.CPUMilli, MemFree: n.MemFree - r.MemoryMiB,
		Free: buf[:len(n.Free)]}
	demand := r.GPUs * r.GPUMilli
	pull := shareGPUPull*float64(freeTotal-demand) + shareCPUPull*float64(after.CPUFree)
	if !r.Fraction() {
		copy(after.Free, n.Free)
		for _, g := range WholeGPUs(n.Free, r.GPUs) {
			after.Free[g] = 0
		}
		return before - mix.Fragmentation(after) - pull, -1
	}
	best, bestGPU := 0.0, -1
	for g, f := range n.Free {
		if f < r.GPUMilli {
			continue
		}
		copy(after.Free, n.Free)
		after.Free[g] -= r.GPUMilli
		sc := before - mix.Fragmentation(after) - pull
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
