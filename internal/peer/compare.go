package peer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/sim"
)

// SystemNames are what Compare can run, in the order it runs them.
var SystemNames = []string{"slurm", "berth", "sim"}

// CompareConfig is one comparison.
type CompareConfig struct {
	Workload *sim.Workload
	Seed     uint64
	// Dir is the working directory: each live system's state, logs and
	// job output go in a directory of its name under it.
	Dir string
	// Berth is the binary the jobs run (`berth workload train`).
	Berth   string
	Systems []string
	// SlurmGPUsOnly: SlurmConfig.GPUsOnly.
	SlurmGPUsOnly bool
	Options       Options
	// Logger tells the run's progress; SystemLog gets the live systems'
	// own logs (berth's server and agents).
	Logger, SystemLog *slog.Logger
}

// Compare runs the workload through each named system in turn (one at a
// time: they share the host's CPUs) and reports them side by side.
func Compare(ctx context.Context, c CompareConfig) (*Report, error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.SystemLog == nil {
		c.SystemLog = slog.New(slog.DiscardHandler)
	}
	for _, s := range c.Systems {
		if !slices.Contains(SystemNames, s) {
			return nil, fmt.Errorf("--systems: %q is not one of %s", s, strings.Join(SystemNames, ", "))
		}
	}
	if c.Options.Compression <= 0 {
		return nil, fmt.Errorf("--compression: %g: expected a positive number", c.Options.Compression)
	}
	// Slurm's munged runs as user munge and must reach its directory
	// under this one.
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(c.Dir, 0o755); err != nil {
		return nil, err
	}
	// A previous run's state would be recovered (Slurm's jobs, berth's
	// table and idempotency keys) and mixed into this one.
	for _, name := range []string{"slurm", "berth"} {
		if ents, err := os.ReadDir(filepath.Join(c.Dir, name)); err == nil && len(ents) > 0 {
			return nil, fmt.Errorf("--dir: %s holds a previous run; remove it or choose another directory", filepath.Join(c.Dir, name))
		}
	}
	w := c.Workload
	horizon := w.Horizon
	if c.Options.Horizon > 0 && c.Options.Horizon < horizon {
		horizon = c.Options.Horizon
	}
	c.Options.Horizon = horizon
	rep := &Report{Workload: w.Name, Seed: c.Seed, Nodes: len(w.Nodes), Hours: horizon.Hours(), Compression: c.Options.Compression,
		Jobs: len(Jobs(w, horizon))}
	for _, n := range w.Nodes {
		rep.GPUs += n.GPUs
	}
	for _, name := range SystemNames {
		if !slices.Contains(c.Systems, name) {
			continue
		}
		c.Logger.Info("bench slurm: starting", "system", name)
		began := time.Now()
		switch name {
		case "slurm":
			s, err := StartSlurm(ctx, SlurmConfig{Dir: filepath.Join(c.Dir, "slurm"), Nodes: w.Nodes, Berth: c.Berth, GPUsOnly: c.SlurmGPUsOnly, Logger: c.SystemLog}, c.Options)
			if err != nil {
				return rep, err
			}
			run, err := Drive(ctx, s, w, c.Options)
			s.Stop()
			if err != nil {
				return rep, err
			}
			if c.SlurmGPUsOnly {
				run.System = "slurm --gpus"
			}
			rep.Add(run)
		case "berth":
			b, err := StartBerth(ctx, BerthConfig{Dir: filepath.Join(c.Dir, "berth"), Nodes: w.Nodes, Berth: c.Berth, Workload: w, Logger: c.SystemLog}, c.Options)
			if err != nil {
				return rep, err
			}
			run, err := Drive(ctx, b, w, c.Options)
			b.Stop()
			if err != nil {
				return rep, err
			}
			rep.Add(run)
		case "sim":
			tw := *w
			tw.Horizon = horizon
			pol, err := sim.NewPolicy("berth", c.Seed)
			if err != nil {
				return rep, err
			}
			m, err := sim.Run(&tw, pol, sim.Options{Seed: c.Seed})
			if err != nil {
				return rep, err
			}
			rep.Systems = append(rep.Systems, FromSim(m))
			rep.Notes = append(rep.Notes, "berth sim: its inference short of demand is the simulator's demand shed, in GPU-hours, counting a replica from its model load; its queue times come from its own metrics")
		}
		c.Logger.Info("bench slurm: done", "system", name, "took", time.Since(began).Round(time.Second))
	}
	return rep, nil
}
