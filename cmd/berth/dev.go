package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/berthsched/berth/internal/devstack"
	"github.com/berthsched/berth/internal/sched"
	"github.com/spf13/cobra"
)

func newDevCmd() *cobra.Command {
	cfg := devstack.Config{}
	var demo, logJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run all of berth on this machine: server, a fleet of agents with fake GPUs, real workloads, the dashboard",
		Long: `dev starts, in one process tree, the embedded etcd and the berth server, and
a fleet of real node agents with fake GPUs (default 16 nodes × 8 GPUs in 2
pods), which run real workload processes. It prints the dashboard URL and
an admin token, and writes the CLI config, so 'berth job ls' and the rest
just work. --demo also submits a realistic mix: a 32-GPU pod gang, sweeps
of 1-GPU jobs, and two inference deployments with a diurnal autoscaler.

Ctrl-C stops everything (workloads get SIGTERM first). State lives in
--data-dir, so the next 'berth dev' carries on where this one stopped.

Dev mode compresses time where waiting would hide the behaviour: a job may
be preempted after 1 minute (10 in production).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if verbose {
				cfg.Logger = newLogger(cmd, logJSON)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Berth = exe
			// The guards against thrash at a demo's pace: minutes, not
			// the hours a fleet's jobs run.
			cfg.Sched = sched.Config{MinRuntime: time.Minute, RepeatMinRuntime: 10 * time.Minute}
			if demo && !cmd.Flags().Changed("nodes") && !cmd.Flags().Changed("pods") {
				// The demo's standing mix fills about a pod and a half:
				// a third pod stays empty for the tour's 64-GPU gang.
				cfg.Nodes, cfg.Pods = 24, 3
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "starting berth: %d nodes × %d GPUs in %d pods (%d in the sharing pool), state in %s\n", cfg.Nodes, cfg.GPUsPerNode, cfg.Pods, cfg.SharingNodes, cfg.DataDir)
			s, err := devstack.Start(ctx, cfg)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("%w\n  (another berth on %s? pass --listen 127.0.0.1:0)", err, cfg.Listen)
			}
			cfgPath, err := saveConfig(cliConfig{Server: s.Addr, Token: s.Admin})
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "could not write the CLI config: %v\n", err)
			}
			if demo {
				if err := s.RunDemo(ctx, devstack.Demo{}); err != nil {
					s.Stop()
					return err
				}
			}
			fmt.Fprintf(out, `
berth is running.
  dashboard  %s
  server     http://%s
  admin      %s
  CLI        config written to %s: try 'berth topology', 'berth job ls', 'berth nodes ls'
  faults     berth agent inject --state-dir %s --gpu 3 --xid 48

Ctrl-C stops it; state stays in %s.
`, s.URL(), s.Addr, s.Admin, cfgPath, filepath.Join(cfg.DataDir, "agents", "n000"), cfg.DataDir)
			<-ctx.Done()
			fmt.Fprintln(out, "\nstopping: workloads get SIGTERM, then the agents and the server stop")
			return s.Stop()
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 16, "nodes in the fake fleet (the design's fleet: 128; --demo: 24)")
	f.IntVar(&cfg.Pods, "pods", 2, "pods (leaf switches) the nodes are spread over (--demo: 3)")
	f.IntVar(&cfg.GPUsPerNode, "gpus-per-node", 8, "GPUs per node (1-64)")
	f.StringVar(&cfg.Model, "model", "H100", "GPU model of the fake fleet")
	f.IntVar(&cfg.SharingNodes, "sharing-nodes", 2, "the last nodes form the sharing pool, where jobs may ask for a share of a GPU (--gpu-milli)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "address the server (API and dashboard) listens on")
	f.StringVar(&cfg.DataDir, "data-dir", filepath.Join(defaultDataDir(), "dev"), "where the table, agents' state and logs live")
	f.DurationVar(&cfg.Interval, "heartbeat-interval", time.Second, "agents' heartbeat interval")
	f.DurationVar(&cfg.HistoryEvery, "history-every", 5*time.Second, "how often the dashboard's plots get a sample (the server's default is 30s)")
	f.StringVar(&cfg.Container.Podman, "podman", "podman", "podman binary the agents run jobs that name an image with")
	f.StringVar(&cfg.Container.Runtime, "container-runtime", "", "OCI runtime for podman, a full path such as /usr/sbin/runc (default: podman's)")
	f.StringArrayVar(&cfg.Container.Args, "container-arg", nil, "an option for every podman run (repeatable)")
	f.StringVar(&cfg.Container.Pull, "image-pull", "missing", "image pull policy: missing, always or never")
	f.BoolVar(&demo, "demo", false, "submit a realistic mix and run a diurnal autoscaler")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the server's and agents' events to stderr")
	f.BoolVar(&logJSON, "log-json", false, "with -v, log JSON lines")
	return cmd
}
