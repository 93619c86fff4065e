package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berthsched/berth/internal/sim"
	"github.com/spf13/cobra"
)

func newSimPackingCmd() *cobra.Command {
	var cfg sim.PackingConfig
	var policies, seeds, format string
	cmd := &cobra.Command{
		Use:   "packing",
		Short: "FGD's GPU-sharing packing benchmark: unallocated GPU % as arrived demand grows",
		Long: `packing reproduces the experiment of "Beware of Fragmentation" (FGD, USENIX
ATC 2023) on Alibaba's openb trace: the pod list resampled to --tune × the
fleet's GPU capacity for each seed, placed one by one with no departures,
under CPU, memory and GPU-model constraints. It reports the GPU capacity
left unallocated as arrived demand passes each percent of capacity.
Policies: random, best-fit and fgd as the paper scores them, and berth (the
share placer berth uses in sharing pools). Protocol: docs/sharing.md.`,
		Example: `  berth sim packing --pods ../shared/traces/openb/openb_pod_list_default.csv \
      --nodes ../shared/traces/openb/openb_node_list_gpu_node.csv \
      --policy random,best-fit,fgd,berth --tune 1.3 --seeds 42-51`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format: %q: expected table or json", format)
			}
			if cfg.Pods == "" || cfg.Nodes == "" {
				return fmt.Errorf("--pods and --nodes: required: the openb pod and node lists")
			}
			var err error
			if cfg.Seeds, err = sim.ParseSeeds(seeds); err != nil {
				return err
			}
			cfg.Policies = strings.Split(policies, ",")
			rep, err := sim.RunPackingExperiment(cfg)
			if err != nil {
				return err
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			sim.WritePackingTable(cmd.OutOrStdout(), rep, cfg.Policies)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Pods, "pods", "", "openb pod list (name, cpu_milli, num_gpu; memory_mib, gpu_milli, gpu_spec optional)")
	f.StringVar(&cfg.Nodes, "nodes", "", "openb node list (sn, cpu_milli, memory_mib, gpu; model optional)")
	f.StringVar(&policies, "policy", "random,best-fit,fgd,berth", "policies, comma-separated: "+strings.Join(sim.PackingPolicies, ", "))
	f.Float64Var(&cfg.Tune, "tune", 1.3, "resample the trace to this multiple of GPU capacity")
	f.StringVar(&seeds, "seeds", "42-51", "seeds: N-M or a comma-separated list")
	f.StringVar(&format, "format", "table", "table or json")
	return cmd
}
