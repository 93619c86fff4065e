package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berthsched/berth/internal/peer"
	"github.com/berthsched/berth/internal/sim"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Compare berth with another scheduler, live, on the same workload",
	}
	var o struct {
		workload, config, dir, report, format, systems string
		hours, compression                             float64
		seed                                           uint64
		poll                                           time.Duration
		gpusOnly                                       bool
	}
	slurm := &cobra.Command{
		Use:   "slurm",
		Short: "Replay one workload through a real Slurm, a real berth and berth sim; compare them",
		Long: `slurm starts a one-host Slurm (Debian's slurm-wlm: munged, slurmctld, one
slurmd per node with fake GPU device files, a topology switch per pod),
replays the workload into it in compressed real time, stops it, then does
the same with berth's dev stack (a real server and one agent per node), then
runs the simulator on the same workload. Both live systems run the same
stand-in training process (berth workload train), which checkpoints every
durable interval and on SIGTERM; both are measured from outside by the same
polls. It must run as root (slurmd runs jobs as root; the fake GPUs are
device files). docs/slurm.md says what each row means and where the
harness departs from a real site.

  berth bench slurm --hours 6 --compression 60 --report /tmp/peer`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !sim.IsSeedVariant(o.workload) {
				return fmt.Errorf("--workload: %q is not one of %s", o.workload, strings.Join(sim.SeedVariants(), ", "))
			}
			if o.hours <= 0 {
				return fmt.Errorf("--hours: %g: expected a positive number", o.hours)
			}
			if o.compression <= 0 {
				return fmt.Errorf("--compression: %g: expected a positive number (simulated seconds per real second)", o.compression)
			}
			for _, name := range strings.Split(o.systems, ",") {
				if !slices.Contains(peer.SystemNames, name) {
					return fmt.Errorf("--systems: %q is not one of %s", name, strings.Join(peer.SystemNames, ", "))
				}
			}
			if o.format != "table" && o.format != "json" {
				return fmt.Errorf("--format: %q is not one of table, json", o.format)
			}
			c, err := sim.LoadSeedVariant(o.workload, o.config)
			if err != nil {
				return err
			}
			c.Days = o.hours / 24
			w := sim.Seed(c, o.seed)
			w.Name = o.workload
			self, err := os.Executable()
			if err != nil {
				return err
			}
			dir := o.dir
			if dir == "" {
				if dir, err = os.MkdirTemp("", "berth-bench-slurm-"); err != nil {
					return err
				}
			}
			if dir, err = filepath.Abs(dir); err != nil {
				return err
			}
			// Ctrl-C ends the replay and stops the systems (every daemon and
			// job), instead of leaving a Slurm running.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := peer.Compare(ctx, peer.CompareConfig{Workload: w, Seed: o.seed, Dir: dir, Berth: self,
				Systems: strings.Split(o.systems, ","), SlurmGPUsOnly: o.gpusOnly, Options: peer.Options{Compression: o.compression, Poll: o.poll},
				Logger: newLogger(cmd, false), SystemLog: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if o.format == "json" {
				err = rep.WriteJSON(out)
			} else {
				err = rep.WriteTable(out)
			}
			if err != nil {
				return err
			}
			if o.report != "" {
				if err := rep.WriteHTML(o.report); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "report: %s\n", filepath.Join(o.report, "index.html"))
			}
			return nil
		},
	}
	f := slurm.Flags()
	f.StringVar(&o.workload, "workload", "seed-small", "a seed workload sized for one host: "+strings.Join(sim.SeedVariants(), ", "))
	f.StringVar(&o.config, "config", "", "YAML overriding the workload's defaults (see: berth sim config)")
	f.Float64Var(&o.hours, "hours", 6, "simulated hours to replay")
	f.Float64Var(&o.compression, "compression", 60, "simulated seconds per real second")
	f.Uint64Var(&o.seed, "seed", 1, "seed for the workload generator")
	f.DurationVar(&o.poll, "poll", time.Second, "real time between polls of each system")
	f.StringVar(&o.systems, "systems", strings.Join(peer.SystemNames, ","), "systems to run, comma-separated")
	f.StringVar(&o.dir, "dir", "", "working directory for both systems' state and logs (default: a new temporary one)")
	f.StringVar(&o.report, "report", "", "write an HTML report with plots and per-job CSVs into this directory")
	f.StringVar(&o.format, "format", "table", "table or json")
	f.BoolVar(&o.gpusOnly, "slurm-gpus-only", false, "submit Slurm's node jobs as --gpus=G, no node count (Slurm may spread them), instead of -N1 --gres=gpu:G")
	cmd.AddCommand(slurm)
	return cmd
}
