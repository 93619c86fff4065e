package sim

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// PackingPolicies are the policies `berth sim packing` runs: the paper's
// baselines and berth's share placer.
var PackingPolicies = []string{"random", "best-fit", "fgd", "berth"}

// PackingConfig is one `berth sim packing` invocation.
type PackingConfig struct {
	Pods, Nodes string
	Policies    []string
	Tune        float64
	Seeds       []int64
}

// PackingReport is its JSON output.
type PackingReport struct {
	Workload string                         `json:"workload"`
	Tune     float64                        `json:"tune"`
	Seeds    []int64                        `json:"seeds"`
	Policies map[string]PackingPolicyResult `json:"policies"`
	// Seconds is the experiment's wall time, every run on all cores.
	Seconds float64 `json:"seconds"`
}

// PackingPolicyResult is one policy: mean unallocated GPU % by arrived %
// over the seeds, and each seed's curve. Keys are arrived percents "0" to
// "130"; null where no placement event fell within ±1 of it.
type PackingPolicyResult struct {
	UnallocatedPctAt map[string]*float64            `json:"unallocated_pct_at"`
	PerSeed          map[string]map[string]*float64 `json:"per_seed"`
	// Seconds is the CPU time of this policy's runs (their sum; they run
	// beside each other).
	Seconds float64 `json:"seconds"`
}

// ParseSeeds reads "42-51" or "42,45,50".
func ParseSeeds(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds: %q: expected N, N-M or a comma-separated list", s)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seeds: %q: expected N-M with M ≥ N", s)
			}
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	return out, nil
}

func packingPolicy(name string, pods []PackPod) (packPolicy, error) {
	switch name {
	case "random":
		return randomPolicy{ok: new([]int)}, nil
	case "best-fit":
		return newBestFit(), nil
	case "fgd":
		return &cached{sc: newFGDScorer(pods)}, nil
	case "berth":
		return &cached{sc: newBerthScorer(pods)}, nil
	}
	return nil, fmt.Errorf("--policy: %q: expected one of %s", name, strings.Join(PackingPolicies, ", "))
}

// RunPackingExperiment runs every policy over every seed.
func RunPackingExperiment(cfg PackingConfig) (*PackingReport, error) {
	if cfg.Tune <= 0 || cfg.Tune > 10 {
		return nil, fmt.Errorf("--tune: %v: expected a positive factor such as 1.3", cfg.Tune)
	}
	if len(cfg.Seeds) == 0 {
		return nil, fmt.Errorf("--seeds: at least one seed")
	}
	nodes, err := LoadPackNodes(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	pods, err := LoadPackPods(cfg.Pods)
	if err != nil {
		return nil, err
	}
	maxPct := int(math.Round(cfg.Tune * 100))
	rep := &PackingReport{Workload: cfg.Pods, Tune: cfg.Tune, Seeds: cfg.Seeds, Policies: map[string]PackingPolicyResult{}}
	lists := make([][]PackPod, len(cfg.Seeds))
	for i, seed := range cfg.Seeds {
		lists[i] = PackingWorkload(pods, nodes, cfg.Tune, seed)
	}
	for _, name := range cfg.Policies {
		if _, err := packingPolicy(name, pods); err != nil {
			return nil, err
		}
	}
	// Every (policy, seed) run is independent: they run on all cores, each
	// with its own policy value and state, and are put together in order.
	type run struct {
		policy, seed int
		res          PackingResult
		took         time.Duration
	}
	runs := make([]run, 0, len(cfg.Policies)*len(cfg.Seeds))
	for p := range cfg.Policies {
		for i := range cfg.Seeds {
			runs = append(runs, run{policy: p, seed: i})
		}
	}
	t0 := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				r := &runs[k]
				pol, _ := packingPolicy(cfg.Policies[r.policy], pods)
				start := time.Now()
				r.res = RunPacking(nodes, lists[r.seed], pol, cfg.Seeds[r.seed], maxPct)
				r.took = time.Since(start)
			}
		}()
	}
	for k := range runs {
		next <- k
	}
	close(next)
	wg.Wait()
	rep.Seconds = time.Since(t0).Seconds()
	for p, name := range cfg.Policies {
		res := PackingPolicyResult{UnallocatedPctAt: map[string]*float64{}, PerSeed: map[string]map[string]*float64{}}
		sum, cnt := make([]float64, maxPct+1), make([]int, maxPct+1)
		for _, r := range runs {
			if r.policy != p {
				continue
			}
			res.Seconds += r.took.Seconds()
			curve := map[string]*float64{}
			for k, v := range r.res.Unallocated {
				if !math.IsNaN(v) {
					v := v
					curve[strconv.Itoa(k)] = &v
					sum[k] += v
					cnt[k]++
				} else {
					curve[strconv.Itoa(k)] = nil
				}
			}
			res.PerSeed[strconv.FormatInt(cfg.Seeds[r.seed], 10)] = curve
		}
		for k := range sum {
			if cnt[k] > 0 {
				v := sum[k] / float64(cnt[k])
				res.UnallocatedPctAt[strconv.Itoa(k)] = &v
			} else {
				res.UnallocatedPctAt[strconv.Itoa(k)] = nil
			}
		}
		rep.Policies[name] = res
	}
	return rep, nil
}

// WritePackingTable prints unallocated GPU % at chosen arrived percents.
func WritePackingTable(w io.Writer, rep *PackingReport, order []string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	cols := []int{50, 80, 90, 95, 100, 110, 120, 130}
	fmt.Fprintf(tw, "policy\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "@%d%%\t", c)
	}
	fmt.Fprintf(tw, "run seconds\t\n")
	for _, name := range order {
		r, ok := rep.Policies[name]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t", name)
		for _, c := range cols {
			if v := r.UnallocatedPctAt[strconv.Itoa(c)]; v != nil {
				fmt.Fprintf(tw, "%.2f\t", *v)
			} else {
				fmt.Fprintf(tw, "-\t")
			}
		}
		fmt.Fprintf(tw, "%.2f\t\n", r.Seconds)
	}
	tw.Flush()
	fmt.Fprintf(w, "unallocated GPU %% of capacity when arrived demand reaches each %% of capacity; mean of %d seeds, tune %.2f; %.2f s wall on %d cores\n", len(rep.Seeds), rep.Tune, rep.Seconds, runtime.GOMAXPROCS(0))
}
