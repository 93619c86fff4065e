package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
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
var seedVariants = map[string]func(c *SeedConfig){
	"seed": func(*SeedConfig) {},
	"seed-correlated": func(c *SeedConfig) {
		for i := range c.Training.Classes {
			c.Training.Classes[i].BusinessHours = true
		}
	},
	"seed-heavy": heavy,
	"seed-heavy-elastic": func(c *SeedConfig) {
		heavy(c)
		for i := range c.Training.Classes {
			if k := &c.Training.Classes[i]; k.GPUs >= 64 {
				k.Elastic = 0.5
			}
		}
	},
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
