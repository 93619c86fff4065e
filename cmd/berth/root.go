package main

import (
	"fmt"
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
		newAgentCmd(), newWorkloadCmd(), newBenchCmd(), newKubeCmd(),
		newJobCmd(), newDeployCmd(), newTopologyCmd(), newNodesCmd(), newQuotaCmd(), newAlertsCmd(), newUsageCmd())
	strictGroups(root)
	completeArgs(root)
	return root
}

// strictGroups makes every command group refuse an unknown subcommand
// with an error and a non-zero exit (cobra prints the group's help and
// exits 0 otherwise, so `berth job logz` looked like it worked), and
// print its help when given none.
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q for %q; run '%s --help' for its commands", args[0], cmd.CommandPath(), cmd.CommandPath())
		}
		return cmd.Help()
	}
}

// newLogger logs to the command's stderr, as text or JSON lines.
func newLogger(cmd *cobra.Command, json bool) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(cmd.ErrOrStderr(), nil)
	if json {
		h = slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
	}
	return slog.New(h)
}
