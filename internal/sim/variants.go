package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// seedVariants are the named variants of the seed workload, each an
// overlay on seed.yaml's defaults (a --config file still applies on top):
//
//   - seed: the design's mix as stated: inference peaks in business hours,
//     training arrives around the clock (anti-correlated, §1).
//   - seed-correlated: every training class arrives in business hours
//     only, at the same GPU-hours: the design's stated precondition fails
//     and sharing has the least to gain.
//   - seed-heavy: 20% more training GPU-hours, and every service's
//     max_replicas 20% higher, so inference's capped peak grows too.
//   - seed-heavy-elastic: seed-heavy with half of its training jobs of 64
//     GPUs or more elastic (§9.4), the same jobs on the same seed: run it
//     with --policy berth-rigid,berth to see what elasticity buys.
//   - seed-small: the fleet one host can run live (32 nodes × 8 GPUs in 4
//     pods), six hours of jobs of 1-32 GPUs that last minutes to hours,
//     two small services over one business-hours hump. `berth bench
//     slurm` replays it through a real Slurm, a real berth and this
//     simulator (docs/slurm.md).
var seedVariants = map[string]func(c *SeedConfig){
	"seed": func(*SeedConfig) {},
	"seed-correlated": func(c *SeedConfig) {
		for i := range c.Training.Classes {
			c.Training.Classes[i].BusinessHours = true
		}
	},
	"seed-heavy": heavy,
	"seed-small": small,
	"seed-heavy-elastic": func(c *SeedConfig) {
		heavy(c)
		for i := range c.Training.Classes {
			if k := &c.Training.Classes[i]; k.GPUs >= 64 {
				k.Elastic = 0.5
			}
		}
	},
}

func small(c *SeedConfig) {
	c.Fleet.Pods, c.Fleet.NodesPerPod = 4, 8
	c.Days = 0.25
	// Ten inference nodes (R1: max_replicas × replica GPUs), four small,
	// eighteen training.
	c.SmallPoolNodes = 4
	c.Inference.BusinessStartHour, c.Inference.BusinessEndHour = 0, 6
	c.Inference.Services = []ServiceConfig{
		{Name: "chat-70b", GPUs: 8, Min: 1, Max: 6, Share: 0.6, Load: [2]time.Duration{30 * time.Second, 45 * time.Second}},
		{Name: "chat-8b", GPUs: 4, Min: 2, Max: 8, Share: 0.4, Load: [2]time.Duration{10 * time.Second, 20 * time.Second}},
	}
	// The live systems' storage does not degrade on cue.
	c.Storage.Degradations = DegradationConfig{}
	c.Training.Classes = []ClassConfig{
		{Name: "sweep", GPUs: 1, Topology: "node", Share: 0.15, Runtime: [2]float64{0.1, 1}, Priority: 10, CheckpointGB: 2, Preemptible: true, DeclaresMaxRuntime: true},
		{Name: "notebook", GPUs: 2, Topology: "node", Share: 0.05, Runtime: [2]float64{0.25, 1}, Priority: 30, Preemptible: false},
		{Name: "finetune", GPUs: 8, Topology: "node", Share: 0.30, Runtime: [2]float64{0.25, 1.5}, Priority: 40, CheckpointGB: 140, Preemptible: true, DeclaresMaxRuntime: true},
		{Name: "multinode", GPUs: 16, Topology: "pod", Share: 0.25, Runtime: [2]float64{0.5, 2}, Priority: 50, CheckpointGB: 280, Preemptible: true},
		{Name: "large", GPUs: 32, Topology: "pod", Share: 0.25, Runtime: [2]float64{0.5, 2}, Priority: 60, CheckpointGB: 420, Preemptible: true},
	}
}

func heavy(c *SeedConfig) {
	tr := c.Utilization * c.TrainingShare * 1.2
	inf := c.Utilization * (1 - c.TrainingShare)
	c.Utilization, c.TrainingShare = tr+inf, tr/(tr+inf)
	for i := range c.Inference.Services {
		s := &c.Inference.Services[i]
		s.Max = int(math.Round(float64(s.Max) * 1.2))
	}
}

// SeedVariants lists the named seed workloads.
func SeedVariants() []string {
	out := make([]string, 0, len(seedVariants))
	for k := range seedVariants {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IsSeedVariant reports whether name is one of SeedVariants.
func IsSeedVariant(name string) bool { _, ok := seedVariants[name]; return ok }

// LoadSeedVariant is LoadSeedConfig for a named variant: the defaults,
// the variant's overlay, then the file at path (if any).
func LoadSeedVariant(name, path string) (SeedConfig, error) {
	v, ok := seedVariants[name]
	if !ok {
		return SeedConfig{}, fmt.Errorf("workload: %q is not one of %s", name, strings.Join(SeedVariants(), ", "))
	}
	return loadSeed(v, path)
}
