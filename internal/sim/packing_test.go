package sim

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/sched"
)

const (
	excerptNodes = "testdata/openb/nodes-excerpt.csv"
	excerptPods  = "testdata/openb/pods-excerpt.csv"
)

func loadExcerpt(t *testing.T) ([]PackNode, []PackPod) {
	t.Helper()
	nodes, err := LoadPackNodes(excerptNodes)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadPackPods(excerptPods)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, pods
}

func capacityOf(nodes []PackNode) int64 {
	var c int64
	for _, n := range nodes {
		c += int64(n.GPUs) * 1000
	}
	return c
}

// TestPackingWorkloadResamples: the tuned list reaches the target from
// below (stopping at the first draw that would pass it), is the same for a
// seed and differs between seeds; a trace above the target is trimmed.
func TestPackingWorkloadResamples(t *testing.T) {
	nodes, pods := loadExcerpt(t)
	target := int64(1.3 * float64(capacityOf(nodes)))
	demand := func(l []PackPod) (d int64) {
		for _, p := range l {
			d += p.Demand()
		}
		return
	}
	a := PackingWorkload(pods, nodes, 1.3, 42)
	if d := demand(a); d > target+8000 || d < target-1000 {
		t.Fatalf("tuned demand %d, target %d", d, target)
	}
	if len(a) <= len(pods) {
		t.Fatalf("resampling added nothing: %d of %d", len(a), len(pods))
	}
	b := PackingWorkload(pods, nodes, 1.3, 42)
	c := PackingWorkload(pods, nodes, 1.3, 43)
	same := func(x, y []PackPod) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Name != y[i].Name {
				return false
			}
		}
		return true
	}
	if !same(a, b) || same(a, c) {
		t.Fatal("the list must be a function of the seed")
	}
	trimmed := PackingWorkload(pods, nodes, 0.2, 42)
	if d := demand(trimmed); d > int64(0.2*float64(capacityOf(nodes))) {
		t.Fatalf("trimmed demand %d above 20%% of capacity", d)
	}
}

// TestPackingPoliciesRespectCapacity replays every policy pod by pod and
// checks, after each bind, that no GPU, CPU or memory is overcommitted,
// that model constraints hold, and that what is reported placed is what
// was bound.
func TestPackingPoliciesRespectCapacity(t *testing.T) {
	nodes, pods := loadExcerpt(t)
	list := PackingWorkload(pods, nodes, 1.3, 42)
	for _, name := range PackingPolicies {
		pol, err := packingPolicy(name, pods)
		if err != nil {
			t.Fatal(err)
		}
		s := newPackState(nodes, 42)
		placed := 0
		cpuUsed, memUsed := make([]int64, len(nodes)), make([]int64, len(nodes)) // the test's own tally
		for _, p := range list {
			n, gpus := pol.choose(s, p)
			if n < 0 {
				continue
			}
			if !s.fits(n, p) {
				t.Fatalf("%s: %s placed on %s where it does not fit", name, p.Name, nodes[n].Name)
			}
			if p.NumGPU > 0 && len(gpus) != p.NumGPU {
				t.Fatalf("%s: %s got GPUs %v", name, p.Name, gpus)
			}
			for _, g := range gpus {
				if (p.Sharing() && s.free[n][g] < p.GPUMilli) || (!p.Sharing() && s.free[n][g] != 1000) {
					t.Fatalf("%s: %s bound to GPU %d of %s with %d milli free", name, p.Name, g, nodes[n].Name, s.free[n][g])
				}
			}
			s.bind(n, p, gpus)
			placed++
			cpuUsed[n] += p.CPUMilli
			memUsed[n] += p.MemoryMiB
			if cpuUsed[n] > nodes[n].CPUMilli || memUsed[n] > nodes[n].MemoryMiB {
				t.Fatalf("%s: %s overcommitted", name, nodes[n].Name)
			}
			// The view the feasibility test reads is kept with each bind.
			if v := s.view(n); v.CPUFree != nodes[n].CPUMilli-cpuUsed[n] || v.MemFree != nodes[n].MemoryMiB-memUsed[n] || len(v.Free) > 0 && &v.Free[0] != &s.free[n][0] {
				t.Fatalf("%s: the view of %s is %d CPU, %d MiB free; the node has %d, %d", name, nodes[n].Name,
					v.CPUFree, v.MemFree, nodes[n].CPUMilli-cpuUsed[n], nodes[n].MemoryMiB-memUsed[n])
			}
		}
		got := RunPacking(nodes, list, pol, 42, 130)
		if got.Placed != placed && name != "random" {
			t.Errorf("%s: RunPacking placed %d, replay %d", name, got.Placed, placed)
		}
		if got.Placed+got.Failed != len(list) {
			t.Errorf("%s: %d placed + %d failed != %d pods", name, got.Placed, got.Failed, len(list))
		}
	}
}

// TestPackMetric: each column is 100 − the mean allocation of the events
// at that arrived percent, or within ±1 of it.
func TestPackMetric(t *testing.T) {
	arrived := []int{0, 1, 1, 3, 5}
	alloc := []float64{0, 1, 0.5, 2.5, 4}
	got := packMetric(arrived, alloc, 6)
	want := []float64{100, 100 - 0.75, 100 - 2.5, 100 - 2.5, 100 - 4, 100 - 4, 100 - 4}
	// column 2: none exact, neighbours 1 and 3: (1+0.5+2.5)/3
	want[2] = 100 - (1+0.5+2.5)/3
	// column 4: neighbours 3 and 5; column 6: neighbour 5 only
	want[4] = 100 - (2.5+4)/2
	for k := range want {
		if math.Abs(got[k]-want[k]) > 1e-9 {
			t.Errorf("column %d: %v, want %v", k, got[k], want[k])
		}
	}
	if got := packMetric([]int{0}, []float64{0}, 5); !math.IsNaN(got[4]) {
		t.Errorf("a column with no event near it is %v, want NaN", got[4])
	}
}

// TestPackingLoadErrors name the file, line and column.
func TestPackingLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	cases := map[string]string{
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1000,10,2,500,\n":   "gpu_milli",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1000,10,1,1500,\n":  "gpu_milli",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1000,10,-1,1000,\n": "num_gpu",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,lots,10,1,1000,\n":  "cpu_milli",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1000,10,1,,\n":      "gpu_milli",
		"name,cpu_milli,memory_mib,gpu_milli,gpu_spec\np,1000,10,1000,\n":            "num_gpu",
	}
	for body, field := range cases {
		_, err := LoadPackPods(write("pods.csv", body))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v does not name %s", body, err, field)
		}
	}
	if _, err := LoadPackNodes(write("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn,1000,10,0,T4\n")); err == nil {
		t.Error("a node list without GPU nodes was accepted")
	}
}

// TestBerthUsesTheProductScorer: the harness's berth policy is
// the product's sched.SharePlacer on the trace's mix, node for node, its
// reserve for scarce models included (on a copy of the excerpt with every
// fifth GPU task pinned to the first node's model).
func TestBerthUsesTheProductScorer(t *testing.T) {
	nodes, pods := loadExcerpt(t)
	pinned := slices.Clone(pods)
	for i := range pinned {
		if pinned[i].NumGPU > 0 && i%5 == 0 {
			pinned[i].Models = []string{nodes[0].Model}
		}
	}
	for name, pods := range map[string][]PackPod{"excerpt": pods, "pinned": pinned} {
		t.Run(name, func(t *testing.T) {
			b := newBerthScorer(pods)
			reqs := make([]sched.ShareRequest, len(pods))
			for i, p := range pods {
				reqs[i] = sched.ShareRequest{CPUMilli: p.CPUMilli, MemoryMiB: p.MemoryMiB, GPUs: p.NumGPU, GPUMilli: p.GPUMilli, Models: p.Models}
			}
			product := sched.NewSharePlacer(sched.MixOf(reqs))
			if product.Scarce() != (name == "pinned") {
				t.Fatalf("Scarce() = %v on the %s pods", product.Scarce(), name)
			}
			s := newPackState(nodes, 42)
			cpuUsed, memUsed := make([]int64, len(nodes)), make([]int64, len(nodes)) // the test's own tally
			for _, p := range pods[:50] {
				free := map[string]int64{}
				for n, nd := range nodes {
					for _, f := range s.free[n] {
						free[nd.Model] += int64(f)
					}
				}
				for n := range nodes {
					if !s.fits(n, p) {
						continue
					}
					got, gg := b.score(s, n, p)
					nd := nodes[n]
					want, wg := product.Score(sched.ShareNode{Model: nd.Model, CPUFree: nd.CPUMilli - cpuUsed[n], MemFree: nd.MemoryMiB - memUsed[n], Free: s.free[n]},
						shareRequest(p))
					if got != want || gg != wg {
						t.Fatalf("%s on %s: harness %v/%d, product %v/%d", p.Name, nd.Name, got, gg, want, wg)
					}
					if got, want := b.fleet(s, n, p), -product.Reserve(nd.Model, free[nd.Model], shareRequest(p)); got != want {
						t.Fatalf("%s on %s: harness reserve %v, product %v", p.Name, nd.Name, got, want)
					}
				}
				if n, g := (&cached{sc: b}).choose(s, p); n >= 0 {
					s.bind(n, p, g)
					cpuUsed[n] += p.CPUMilli
					memUsed[n] += p.MemoryMiB
				}
			}
		})
	}
}

// TestPackingExperimentRunsAreIndependent: the experiment's runs, on all
// cores at once, give each seed the curve a run alone gives it.
func TestPackingExperimentRunsAreIndependent(t *testing.T) {
	nodes, pods := loadExcerpt(t)
	seeds := []int64{42, 43, 44}
	rep, err := RunPackingExperiment(PackingConfig{Pods: excerptPods, Nodes: excerptNodes, Policies: PackingPolicies, Tune: 1.3, Seeds: seeds})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range PackingPolicies {
		for _, seed := range seeds {
			pol, _ := packingPolicy(name, pods)
			alone := RunPacking(nodes, PackingWorkload(pods, nodes, 1.3, seed), pol, seed, 130)
			curve := rep.Policies[name].PerSeed[strconv.FormatInt(seed, 10)]
			for k, v := range alone.Unallocated {
				got := curve[strconv.Itoa(k)]
				if math.IsNaN(v) != (got == nil) || got != nil && *got != v {
					t.Fatalf("%s seed %d at %d%%: %v in the experiment, %v alone", name, seed, k, got, v)
				}
			}
		}
	}
}

// TestFGDScoreAsDefined: FGD's score with its per-node cache and one
// trial per free value equals the definition, computed afresh at every
// step: F_before of the node as it is now, and for a fraction every GPU
// tried, the first best kept. The pods are placed as FGD places them, so
// the nodes change under the cache as in the experiment.
func TestFGDScoreAsDefined(t *testing.T) {
	nodes, pods := loadExcerpt(t)
	list := PackingWorkload(pods, nodes, 1.3, 7)
	fgd := newFGDScorer(pods)
	pol := &cached{sc: fgd}
	s := newPackState(nodes, 7)
	definition := func(n int, p PackPod) (int, int) {
		node := s.view(n)
		before := fgd.mix.Fragmentation(node)
		try := func(gpus []int) int {
			after := node
			after.CPUFree -= p.CPUMilli
			after.Free = slices.Clone(node.Free)
			for _, g := range gpus {
				if p.Sharing() {
					after.Free[g] -= p.GPUMilli
				} else {
					after.Free[g] = 0
				}
			}
			return int(math.Floor(100 * sigmoid((before-fgd.mix.Fragmentation(after))/1000)))
		}
		if !p.Sharing() {
			return try(s.gpusFor(n, p)), -1
		}
		best, bestG := math.MinInt, -1
		for g, f := range node.Free {
			if f >= p.GPUMilli {
				if sc := try([]int{g}); sc > best {
					best, bestG = sc, g
				}
			}
		}
		return best, bestG
	}
	checked := 0
	for i, p := range list {
		for n := range nodes {
			if !s.fits(n, p) {
				continue
			}
			got, gotG := fgd.score(s, n, p)
			want, wantG := definition(n, p)
			if got != float64(want) || gotG != wantG {
				t.Fatalf("pod %d (%s) on %s: score %v on GPU %d, the definition gives %d on GPU %d",
					i, p.Name, nodes[n].Name, got, gotG, want, wantG)
			}
			checked++
		}
		if n, gpus := pol.choose(s, p); n >= 0 {
			s.bind(n, p, gpus)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d scores checked", checked)
	}
}
