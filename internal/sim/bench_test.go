package sim

import (
	"os"
	"testing"
)

// The simulator's speed, recorded in BENCHMARKS.md. Run on one core:
//   go test ./internal/sim -run '^$' -bench . -cpu 1 -benchtime 1x

// BenchmarkSeed30Days: 30 simulated days of the seed workload on 1,024
// GPUs through the berth policy.
func BenchmarkSeed30Days(b *testing.B) {
	c, err := LoadSeedConfig("")
	if err != nil {
		b.Fatal(err)
	}
	c.Days = 30
	w := Seed(c, 1)
	for i := 0; i < b.N; i++ {
		p, _ := NewPolicy("berth", 1)
		m, err := Run(w, p, Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(m.EventsPerSecond, "events/s")
		b.ReportMetric(m.SpeedUp, "sim-s/wall-s")
	}
}

// BenchmarkOpenBAllPolicies: the full openb trace (8,152 pods, 1,213
// nodes), loaded and replayed through all six policies.
func BenchmarkOpenBAllPolicies(b *testing.B) {
	pods, nodes := "../../../shared/traces/openb/openb_pod_list_default.csv", "../../../shared/traces/openb/openb_node_list_gpu_node.csv"
	if _, err := os.Stat(pods); err != nil {
		b.Fatalf("the openb trace is expected beside the repository at ../shared/traces/openb: %v", err)
	}
	for i := 0; i < b.N; i++ {
		w, err := LoadOpenB(pods, nodes)
		if err != nil {
			b.Fatal(err)
		}
		rep, err := NewReport(w, PolicyNames, Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		events := 0
		for _, m := range rep.Policies {
			events += m.Events
		}
		b.ReportMetric(float64(events), "events")
	}
}
