package sim

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
)

// The packing experiment of FGD (Weng et al., "Beware of Fragmentation",
// USENIX ATC 2023), as ../shared/benchmarks/openb-packing.md describes it:
// the openb node list, the pod list resampled to 130% of GPU capacity, one
// pod at a time with no departures, and the GPU capacity left unallocated
// as arrived demand passes each percent of capacity.

// PackNode is one node of the packing experiment.
type PackNode struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int
	Model     string
}

// PackPod is one task: CPU, memory, and either GPUs × 1000 milli each or
// one GPU's fraction (GPUMilli < 1000). Models, when set, restricts the
// GPU model.
type PackPod struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	NumGPU    int
	GPUMilli  int
	Models    []string
}

// Demand is the pod's GPU demand in milli.
func (p PackPod) Demand() int64 { return int64(p.NumGPU) * int64(p.GPUMilli) }

// Sharing reports whether the pod asks for a fraction of one GPU.
func (p PackPod) Sharing() bool { return p.NumGPU == 1 && p.GPUMilli < 1000 }

// LoadPackNodes reads the openb node list, GPU nodes only: the columns
// LoadNodes reads, model optional (openbNodeColumns).
func LoadPackNodes(path string) ([]PackNode, error) {
	t, err := readTable(path, openbNodeColumns...)
	if err != nil {
		return nil, err
	}
	var out []PackNode
	for i := range t.rows {
		r := t.row(i)
		n := PackNode{Name: t.get(i, "sn"), CPUMilli: r.int("cpu_milli", 0), MemoryMiB: r.int("memory_mib", 0),
			GPUs: int(r.int("gpu", 0)), Model: t.get(i, "model")}
		if r.err != nil {
			return nil, r.err
		}
		if n.GPUs < 0 || n.GPUs > 64 {
			return nil, t.fail(i, "gpu", "%d is not between 0 and 64", n.GPUs)
		}
		if n.GPUs > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no node with a GPU", path)
	}
	return out, nil
}

// LoadPackPods reads the openb pod list: name, cpu_milli, num_gpu, and
// memory_mib, gpu_milli, gpu_spec where present, with FGD's defaults where
// not (openbPodColumns). Timestamps, QoS and phase are ignored, as in the
// experiment: every pod arrives once, in the tuned order, and none leaves.
func LoadPackPods(path string) ([]PackPod, error) {
	t, err := readTable(path, openbPodColumns...)
	if err != nil {
		return nil, err
	}
	out := make([]PackPod, 0, len(t.rows))
	for i := range t.rows {
		o, err := readOpenBPod(t, i, 0)
		if err != nil {
			return nil, err
		}
		p := PackPod{Name: o.name, CPUMilli: o.cpu, MemoryMiB: o.mem, NumGPU: int(o.gpus), GPUMilli: int(o.milli), Models: o.models}
		switch {
		case p.NumGPU < 0 || p.NumGPU > 64:
			return nil, t.fail(i, "num_gpu", "%d is not between 0 and 64", p.NumGPU)
		case p.NumGPU > 0 && (p.GPUMilli < 1 || p.GPUMilli > 1000):
			return nil, t.fail(i, "gpu_milli", "%d is not between 1 and 1000", p.GPUMilli)
		case p.NumGPU > 1 && p.GPUMilli != 1000:
			return nil, t.fail(i, "gpu_milli", "%d: a multi-GPU task takes whole GPUs (1000)", p.GPUMilli)
		}
		if p.NumGPU == 0 {
			p.GPUMilli = 0
		}
		out = append(out, p)
	}
	return out, nil
}

// PackingWorkload is one seed's submission order: the trace shuffled,
// then resampled (with replacement, from the trace in name order) until
// its GPU demand reaches tune × capacity, or trimmed down to it.
func PackingWorkload(pods []PackPod, nodes []PackNode, tune float64, seed int64) []PackPod {
	orig := append([]PackPod(nil), pods...)
	sort.Slice(orig, func(i, j int) bool { return orig[i].Name < orig[j].Name })
	r := rand.New(rand.NewSource(seed))
	r.Int63() // the reference simulator draws and discards one value first
	list := append([]PackPod(nil), orig...)
	r.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	var capacity, total int64
	for _, n := range nodes {
		capacity += int64(n.GPUs) * 1000
	}
	for _, p := range list {
		total += p.Demand()
	}
	target := int64(tune * float64(capacity))
	if total > target {
		for total > target && len(list) > 0 {
			i := r.Intn(len(list))
			total -= list[i].Demand()
			list = append(list[:i], list[i+1:]...)
		}
		return list
	}
	for k := 0; ; k++ {
		p := orig[r.Intn(len(orig))]
		if total+int64(p.GPUMilli) > target {
			break
		}
		p.Name = fmt.Sprintf("%s-clone-%d", p.Name, k)
		list = append(list, p)
		total += p.Demand()
	}
	return list
}

// PackingResult is one run: unallocated GPU % by arrived demand %.
type PackingResult struct {
	// Unallocated[k] is 100 − mean allocation % over the placement events
	// at which arrived demand was k % of capacity (NaN where no event
	// came within ±1).
	Unallocated []float64
	Placed      int
	Failed      int
}

// roundHalfEven rounds x to the nearest integer, ties to even, as
// Python's round does in the reference analysis scripts.
func roundHalfEven(x float64) int { return int(math.RoundToEven(x)) }

// packMetric turns the per-event (arrived, allocated) percentages into the
// unallocated % column for each arrived % from 0 to maxPct.
func packMetric(arrived []int, alloc []float64, maxPct int) []float64 {
	sum := make([]float64, maxPct+1)
	cnt := make([]int, maxPct+1)
	for i, a := range arrived {
		if a >= 0 && a <= maxPct {
			sum[a] += alloc[i]
			cnt[a]++
		}
	}
	out := make([]float64, maxPct+1)
	for k := range out {
		switch {
		case cnt[k] > 0:
			out[k] = 100 - sum[k]/float64(cnt[k])
		default:
			var s float64
			var c int
			for _, j := range []int{k - 1, k + 1} {
				if j >= 0 && j <= maxPct {
					s += sum[j]
					c += cnt[j]
				}
			}
			if c == 0 {
				out[k] = math.NaN()
			} else {
				out[k] = 100 - s/float64(c)
			}
		}
	}
	return out
}
