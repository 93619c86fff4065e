package sim

import "testing"

// BenchmarkPackingBerth is one packing experiment: berth's share placer,
// seeds 42-51, the default openb trace (BENCHMARKS.md).
func BenchmarkPackingBerth(b *testing.B) { benchPacking(b, "berth") }

// BenchmarkPackingFGD is the same experiment under FGD.
func BenchmarkPackingFGD(b *testing.B) { benchPacking(b, "fgd") }

func benchPacking(b *testing.B, policy string) {
	seeds, _ := ParseSeeds("42-51")
	for b.Loop() {
		if _, err := RunPackingExperiment(PackingConfig{Pods: "../../../shared/traces/openb/openb_pod_list_default.csv", Nodes: "../../../shared/traces/openb/openb_node_list_gpu_node.csv", Policies: []string{policy}, Tune: 1.3, Seeds: seeds}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackingBestFit and BenchmarkPackingRandom are the baselines,
// which test every node for every pod: most of the experiment's wall
// time once berth and FGD were memoised.
func BenchmarkPackingBestFit(b *testing.B) { benchPacking(b, "best-fit") }

// BenchmarkPackingRandom: see BenchmarkPackingBestFit.
func BenchmarkPackingRandom(b *testing.B) { benchPacking(b, "random") }
