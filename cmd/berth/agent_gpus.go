package main

import (
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berthsched/berth/internal/agent/gpu"
)

// newGPUsCmd prints what the agent would report about this node's GPUs:
// the first thing to run on a new GPU node, and how an operator checks
// MIG partitions and NVLinks before the node joins.
func newGPUsCmd() *cobra.Command {
	var (
		out       outFlag
		fakeGPUs  int
		fakeModel string
		fakeMIG   string
	)
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "Show this node's GPUs as the agent sees them (NVML, or the fake backend)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			b, err := openBackend(fakeGPUs, fakeModel, fakeMIG, "local", "", slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer b.Close()
			inv, err := b.Inventory()
			if err != nil {
				return err
			}
			view := struct {
				Backend string `json:"backend"`
				gpu.Inventory
			}{b.Name(), inv}
			return out.print(cmd.OutOrStdout(), view, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "backend %s, model %s, %d GPUs\n", b.Name(), inv.Model, len(inv.Devices))
				fmt.Fprintln(tw, "GPU\tUUID\tMEMORY\tMIG\tNVLINKS")
				for _, d := range inv.Devices {
					mig := "off"
					if len(d.MIG) > 0 {
						var parts []string
						for _, m := range d.MIG {
							parts = append(parts, fmt.Sprintf("%s (%dm) %s", m.Profile(), m.Milli(), m.UUID))
						}
						mig = strings.Join(parts, ", ")
					} else if len(d.MIGOffered) > 0 {
						mig = "off (offers " + strings.Join(d.MIGOffered, " ") + ")"
					}
					links := 0
					if inv.Links != nil && d.Index < len(inv.Links.Links) {
						for _, l := range inv.Links.Links[d.Index] {
							links += l
						}
					}
					fmt.Fprintf(tw, "%d\t%s\t%d MiB\t%s\t%d\n", d.Index, d.UUID, d.MemoryMiB, mig, links)
				}
			})
		},
	}
	out.add(cmd)
	f := cmd.Flags()
	f.IntVar(&fakeGPUs, "fake-gpus", 0, "show the fake backend with this many GPUs instead of NVML")
	f.StringVar(&fakeModel, "fake-model", "H100", "model the fake GPUs report")
	f.StringVar(&fakeMIG, "fake-mig", "", "fake MIG layout: GPU=SLICES,... per GPU, e.g. 0=3,2,1,1")
	return cmd
}
