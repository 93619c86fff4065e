package sim

import (
	"math"
	"sort"
	"strings"
)

// typicalPod is one task type of the workload and its frequency: the
// "typical pods" FGD measures fragmentation against.
type typicalPod struct {
	CPUMilli int64
	NumGPU   int
	GPUMilli int
	Models   []string
	P        float64
}

// typicalPods are the most frequent (cpu, gpu_milli, num_gpu, gpu_spec)
// types of the trace, up to 95% of its tasks, frequencies renormalised.
func typicalPods(pods []PackPod) []typicalPod {
	type key struct {
		cpu      int64
		num, gpu int
		spec     string
	}
	count := map[key]int{}
	for _, p := range pods {
		count[key{p.CPUMilli, p.NumGPU, p.GPUMilli, strings.Join(p.Models, "|")}]++
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
		if a.num != b.num {
			return a.num < b.num
		}
		if a.gpu != b.gpu {
			return a.gpu < b.gpu
		}
		return a.spec < b.spec
	})
	var out []typicalPod
	covered, total := 0, len(pods)
	for _, k := range keys {
		if float64(covered) >= 0.95*float64(total) {
			break
		}
		covered += count[k]
		t := typicalPod{CPUMilli: k.cpu, NumGPU: k.num, GPUMilli: k.gpu, P: float64(count[k])}
		if k.spec != "" {
			t.Models = strings.Split(k.spec, "|")
		}
		out = append(out, t)
	}
	for i := range out {
		out[i].P /= float64(covered)
	}
	return out
}

// nodeFrag is FGD's F(n): the GPU milli each typical task could not use,
// weighted by how often it comes. A task that does not fit at all wastes
// every free GPU milli; one that fits wastes the GPUs with less free than
// it needs.
func nodeFrag(cpuFree int64, model string, free []int, typ []typicalPod) float64 {
	var total int
	for _, f := range free {
		total += f
	}
	var F float64
	for _, m := range typ {
		need := m.GPUMilli
		if m.NumGPU > 1 {
			need = 1000
		}
		fits := m.CPUMilli <= cpuFree && (m.NumGPU == 0 || modelOK(m.Models, model))
		var frag, whole int
		for _, f := range free {
			if f < need {
				frag += f
			}
			if f == 1000 {
				whole++
			}
		}
		if fits && m.NumGPU > 0 {
			if m.NumGPU > 1 || m.GPUMilli == 1000 {
				fits = whole >= m.NumGPU
			} else {
				fits = total-frag > 0
			}
		}
		if !fits {
			F += m.P * float64(total)
		} else {
			F += m.P * float64(frag)
		}
	}
	return F
}

// fgdScorer is FGD: ⌊100·sigmoid((F_before − F_after)/1000)⌋; a fraction
// tries every GPU and keeps the best.
type fgdScorer struct{ typ []typicalPod }

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func (pol fgdScorer) score(s *packState, n int, p PackPod) (float64, int) {
	nd := s.nodes[n]
	cpuFree := nd.CPUMilli - s.cpuUsed[n]
	before := nodeFrag(cpuFree, nd.Model, s.free[n], pol.typ)
	after := make([]int, len(s.free[n]))
	try := func(gpus []int) int {
		copy(after, s.free[n])
		for _, g := range gpus {
			if p.Sharing() {
				after[g] -= p.GPUMilli
			} else {
				after[g] = 0
			}
		}
		d := before - nodeFrag(cpuFree-p.CPUMilli, nd.Model, after, pol.typ)
		return int(math.Floor(100 * sigmoid(d/1000)))
	}
	if !p.Sharing() {
		return float64(try(s.gpusFor(n, p))), -1
	}
	bestSc, bestG := math.MinInt, -1
	for g, f := range s.free[n] {
		if f >= p.GPUMilli {
			if sc := try([]int{g}); sc > bestSc {
				bestSc, bestG = sc, g
			}
		}
	}
	return float64(bestSc), bestG
}
