package main

import (
	"log/slog"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "berth shares one GPU fleet between training and inference",
		Long: `berth is a GPU fleet scheduler. Training is gang-scheduled and yields
cooperatively; inference is elastic and never preempted. Placement works on
topology-connected GPU sets (node = NVLink domain, pod = leaf switch), and
largest_placeable is the number that says what the fleet can still run.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd(), newDevCmd(), newSimCmd(), newServerCmd(), newTokenCmd(), newLoadgenCmd(),
		newAgentCmd(), newWorkloadCmd(),
		newJobCmd(), newDeployCmd(), newTopologyCmd(), newNodesCmd(), newQuotaCmd(), newAlertsCmd())
	return root
}

// newLogger logs to the command's stderr, as text or JSON lines.
func newLogger(cmd *cobra.Command, json bool) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(cmd.ErrOrStderr(), nil)
	if json {
		h = slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
	}
	return slog.New(h)
}
