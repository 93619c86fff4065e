package main

import "github.com/spf13/cobra"

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
	root.AddCommand(newVersionCmd(), newDevCmd(), newSimCmd(), newServerCmd(), newTokenCmd(), newLoadgenCmd())
	return root
}
