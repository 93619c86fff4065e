package main

import (
	"os"
	"time"

	"github.com/berthsched/berth/internal/workload"
	"github.com/spf13/cobra"
)

func newWorkloadCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workload",
		Short: "Stand-in training and inference processes that follow berth's agent contract",
	}
	cmd.AddCommand(newTrainCmd(), newServeCmd())
	return cmd
}

// exitWith ends the process with a workload's exit status: the agent reads
// it, so it must be the process's own, not cobra's error path.
func exitWith(cmd *cobra.Command, err error) error {
	if err != nil && workload.ExitCode(err) == 1 {
		return err
	}
	os.Exit(workload.ExitCode(err))
	return nil
}

func newTrainCmd() *cobra.Command {
	var cfg workload.TrainConfig
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Run training steps; checkpoint on SIGTERM; resume from $BERTH_RESTORE",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.OutOrStdout()
			if cfg.Elastic {
				cfg.Resize = workload.ResizeSignal()
			}
			return exitWith(cmd, workload.Train(workload.StopSignal(), cfg))
		},
	}
	cmd.Flags().IntVar(&cfg.Steps, "steps", 100, "steps to run in all (across preemptions)")
	cmd.Flags().DurationVar(&cfg.StepTime, "step-time", time.Second, "time one step takes")
	cmd.Flags().BoolVar(&cfg.Elastic, "elastic", false, "follow an elastic job's size: on SIGUSR1 read $BERTH_SIZE_FILE, checkpoint, continue at the new size")
	cmd.Flags().IntVar(&cfg.CheckpointEvery, "checkpoint-every", 0, "also checkpoint every N steps (0: only on SIGTERM)")
	cmd.Flags().Var(bytesFlag{&cfg.CheckpointBytes}, "checkpoint-bytes", "training state the checkpoint stands for (50GB); reported to the agent with the write's seconds")
	var bw int64
	cmd.Flags().Var(bytesFlag{&bw}, "checkpoint-bandwidth", "bytes per second the pretended storage takes (10GB): a checkpoint takes bytes / bandwidth (0: no delay)")
	cmd.PreRun = func(*cobra.Command, []string) { cfg.CheckpointBandwidth = float64(bw) }
	return cmd
}

func newServeCmd() *cobra.Command {
	var cfg workload.ServeConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve HTTP as an inference replica; drain on SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Out = cmd.OutOrStdout()
			return exitWith(cmd, workload.Serve(workload.StopSignal(), cfg))
		},
	}
	cmd.Flags().StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "address to serve on (port 0: any free port, written to $BERTH_ALLOC_DIR/addr)")
	cmd.Flags().DurationVar(&cfg.Drain, "drain", 5*time.Second, "how long requests in flight get after SIGTERM")
	cmd.Flags().DurationVar(&cfg.Latency, "latency", 0, "added to each answer, standing in for a forward pass")
	cmd.Flags().DurationVar(&cfg.Load, "load-time", 0, "model load time: /healthz answers 503 until then (a readiness check sees it)")
	return cmd
}
