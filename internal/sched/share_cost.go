package sched

// What the share placer minimises besides the GPU value a share spends
// (share_value.go): FGD's fragmentation and berth's stranding, both
// against the demand mix (share.go has the placer).

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

// Cost is the node's cost as the share placer sees it: FGD's
// fragmentation against the mix plus the GPU milli stranded by CPU and
// memory. The placer minimises the value a share spends first
// (valueWeight, share_value.go) and the growth of this second.
func (p *SharePlacer) Cost(n ShareNode) float64 {
	s := summarize(n.Free)
	return p.Mix.fragmentation(n, s) + strandWeight*p.Mix.stranded(n, s)
}
