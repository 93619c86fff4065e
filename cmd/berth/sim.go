package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sim"
)

func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Replay fleets and workloads through berth and the baseline policies",
		Long: `sim runs berth's scheduling core (the same code the server runs) and the
baseline policies over a workload on a virtual clock, and reports where GPUs,
queue time and fragmentation go.`,
	}
	cmd.AddCommand(newSimRunCmd(), newSimF8Cmd(), newSimConfigCmd(), newSimPlanCmd(), newSimPackingCmd())
	return cmd
}

type simRunOptions struct {
	workload, pods, nodes, config, policy, format, report string
	sacct, slurmInference, slurmMultiNode                 string
	days                                                  float64
	seed                                                  uint64
	penalty, slurmTimeScale                               float64
}

func newSimRunCmd() *cobra.Command {
	o := simRunOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one workload through one or more policies",
		Long: `run replays a workload through the named policies, same workload and seed
for each, and prints a comparison.

Workloads:
  seed   the design's fleet and mix (128 × 8 H100, 4 pods), generated from
         --seed; every parameter in a YAML file (see: berth sim config),
         overridden with --config FILE
  seed-correlated  seed with training arriving in business hours only
  seed-heavy       seed with 20% more training and max_replicas +20%
  seed-heavy-elastic  seed-heavy with half its 64+ GPU training elastic
                   (half to all of its GPUs); compare --policy berth-rigid,berth
  seed-small       32 nodes × 8 GPUs, six hours of 1-32 GPU jobs: the mix
                   berth bench slurm replays live (docs/slurm.md)
  openb  Alibaba's openb GPU trace: --pods FILE --nodes FILE
  csv    a generic job list: --pods FILE (the jobs) with --nodes FILE (a node
         list in openb's format) or the seed fleet from --config
  slurm  a Slurm site's own history: --sacct FILE, on --nodes FILE or the
         seed fleet from --config (below)

` + sim.CSVColumns + `

` + sim.SlurmFormats + `

Policies: ` + strings.Join(sim.PolicyNames, ", ") + `; also berth-rigid (berth with
every elastic job run rigid at its maximum). ` + sim.FluidName + `, ` + sim.FluidSLOName + `, ` + sim.FluidMatchName + ` and
` + sim.BoundName + ` are not policies: training replayed on one fluid pool of GPUs,
inference served first, pauses free; fluid ranks by priority, fluid-slo
serves the jobs under 64 GPUs just in time and the large jobs first
otherwise, fluid-match gives every job a deadline at ` + sim.MatchPolicy + `'s queue
p90 for its class and runs least slack first (can every class meet
` + sim.MatchPolicy + `'s at once while inference is served?), bound favours each size
class in turn over all other training (docs/sim.md, "The relaxation
rows"). They fill only the queue rows; fluid and bound are in the default
list.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd.OutOrStdout(), cmd.ErrOrStderr(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.workload, "workload", "seed", "seed, seed-correlated, seed-heavy, seed-heavy-elastic, seed-small, openb, csv or slurm")
	f.StringVar(&o.pods, "pods", "", "the pod or job list (openb, csv)")
	f.StringVar(&o.nodes, "nodes", "", "the node list (openb, csv)")
	f.StringVar(&o.config, "config", "", "YAML overriding the seed workload's defaults")
	f.StringVar(&o.sacct, "sacct", "", "the Slurm job history (slurm): sacct -P output or a jobcomp/filetxt log")
	f.StringVar(&o.slurmInference, "slurm-inference", "", "partitions or QOS whose jobs are inference replicas (slurm), comma-separated")
	f.StringVar(&o.slurmMultiNode, "slurm-multinode", "pod", "topology of a job on more than one node (slurm): pod or any")
	f.Float64Var(&o.slurmTimeScale, "slurm-time-scale", 1, "multiply every time in the history (slurm): 60 for one berth bench slurm wrote at 60x")
	f.StringVar(&o.policy, "policy", strings.Join(sim.DefaultPolicies, ","), "policies to compare, comma-separated ("+sim.FluidName+", "+sim.BoundName+": the relaxation rows)")
	f.Float64Var(&o.days, "days", 0, "simulated days (seed: default from the config, 30; traces: 0 = the whole trace)")
	f.Uint64Var(&o.seed, "seed", 1, "seed for the generator and the random policy")
	f.Float64Var(&o.penalty, "penalty", 0.52, "runtime stretch of a tensor-parallel job spread over nodes (§2: +52%)")
	f.StringVar(&o.format, "format", "table", "table or json")
	f.StringVar(&o.report, "report", "", "write an HTML report with plots into this directory")
	return cmd
}

func loadWorkload(o simRunOptions) (*sim.Workload, error) {
	if sim.IsSeedVariant(o.workload) {
		c, err := sim.LoadSeedVariant(o.workload, o.config)
		if err != nil {
			return nil, err
		}
		if o.days > 0 {
			c.Days = o.days
		}
		w := sim.Seed(c, o.seed)
		w.Name = o.workload
		return w, nil
	}
	switch o.workload {
	case "openb":
		if o.pods == "" || o.nodes == "" {
			return nil, fmt.Errorf("--pods and --nodes: both are required for --workload openb (the trace ships as openb_pod_list_default.csv and openb_node_list_gpu_node.csv)")
		}
		w, err := sim.LoadOpenB(o.pods, o.nodes)
		if err != nil {
			return nil, err
		}
		w.Trim(o.days)
		return w, nil
	case "slurm":
		if o.sacct == "" {
			return nil, fmt.Errorf("--sacct: required for --workload slurm (sacct -P output or a jobcomp/filetxt log)")
		}
		nodes, err := csvNodes(o)
		if err != nil {
			return nil, err
		}
		var inf []string
		for _, p := range strings.Split(o.slurmInference, ",") {
			if p = strings.TrimSpace(p); p != "" {
				inf = append(inf, p)
			}
		}
		w, err := sim.LoadSlurm(o.sacct, nodes, sim.SlurmMapping{Inference: inf, MultiNode: model.Topology(o.slurmMultiNode), TimeScale: o.slurmTimeScale})
		if err != nil {
			return nil, err
		}
		w.Trim(o.days)
		return w, nil
	case "csv":
		if o.pods == "" {
			return nil, fmt.Errorf("--pods: required for --workload csv (the job list)")
		}
		nodes, err := csvNodes(o)
		if err != nil {
			return nil, err
		}
		w, err := sim.LoadCSV(o.pods, nodes)
		if err != nil {
			return nil, err
		}
		w.Trim(o.days)
		return w, nil
	}
	return nil, fmt.Errorf("--workload: %q is not one of %s, openb, csv, slurm", o.workload, strings.Join(sim.SeedVariants(), ", "))
}

func csvNodes(o simRunOptions) ([]sim.Node, error) {
	if o.nodes != "" {
		return sim.LoadNodes(o.nodes, sim.NodesPerPodDefault)
	}
	c, err := sim.LoadSeedConfig(o.config)
	if err != nil {
		return nil, err
	}
	return sim.Seed(c, o.seed).Nodes, nil
}

// simGCPercent is the GC target `berth sim` runs with unless GOGC is set:
// a replay's live heap is small (tens of MB) and it allocates a decision
// every pass, so at Go's default the collector takes a third of the run.
const simGCPercent = 400

func runSim(out, errOut io.Writer, o simRunOptions) error {
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(simGCPercent))
	}
	if o.format != "table" && o.format != "json" {
		return fmt.Errorf("--format: %q is not one of table, json", o.format)
	}
	policies := strings.Split(o.policy, ",")
	for _, p := range policies {
		if err := sim.CheckPolicy(p); err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
	}
	w, err := loadWorkload(o)
	if err != nil {
		return err
	}
	opt := sim.Options{Seed: o.seed, Penalty: o.penalty}
	var bar *progressBar
	if isTerminal(errOut) {
		bar = &progressBar{w: errOut, policies: len(policies)}
		opt.Progress = bar.update
	}
	rep := sim.StartReport(w, opt)
	for i, name := range policies {
		if bar != nil {
			bar.policy, bar.index = name, i
		}
		if err := rep.Add(w, name, opt); err != nil {
			return err
		}
	}
	if bar != nil {
		bar.done()
	}
	if o.report != "" {
		if err := rep.WriteHTML(o.report); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
	}
	if o.format == "json" {
		return rep.WriteJSON(out)
	}
	if err := rep.WriteTable(out); err != nil {
		return err
	}
	if o.report != "" {
		fmt.Fprintf(out, "\nreport: %s\n", o.report+"/index.html")
	}
	return nil
}

func newSimF8Cmd() *cobra.Command {
	var nodes, gpus, trials int
	var seed uint64
	var format string
	cmd := &cobra.Command{
		Use:   "f8",
		Short: "The §2 table: fully free nodes, analytic f^8 vs random placement vs berth",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case nodes < 1:
				return fmt.Errorf("--nodes: %d must be at least 1", nodes)
			case gpus < 1 || gpus > 64:
				return fmt.Errorf("--gpus-per-node: %d must be between 1 and 64", gpus)
			case trials < 1:
				return fmt.Errorf("--trials: %d must be at least 1", trials)
			case format != "table" && format != "json":
				return fmt.Errorf("--format: %q is not one of table, json", format)
			}
			rows := sim.F8(nodes, gpus, trials, seed)
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return sim.WriteF8(cmd.OutOrStdout(), nodes, gpus, rows)
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 128, "nodes")
	cmd.Flags().IntVar(&gpus, "gpus-per-node", 8, "GPUs per node")
	cmd.Flags().IntVar(&trials, "trials", 200, "Monte Carlo trials per row")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed")
	cmd.Flags().StringVar(&format, "format", "table", "table or json")
	return cmd
}

func newSimConfigCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Print the seed workload's default configuration (documented YAML)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(sim.SeedDefaults())
			return err
		},
	}
}

// progressBar draws one line on a terminal; it is never used when the
// output is piped.
type progressBar struct {
	w               io.Writer
	policy          string
	index, policies int
	last            time.Time
}

func (b *progressBar) update(done, total time.Duration) {
	if time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	const width = 30
	n := int(frac * width)
	fmt.Fprintf(b.w, "\r%-12s [%s%s] %3.0f%%  policy %d/%d, day %.1f", b.policy, strings.Repeat("#", n), strings.Repeat(".", width-n),
		100*frac, b.index+1, b.policies, done.Hours()/24)
}

func (b *progressBar) done() { fmt.Fprint(b.w, "\r\033[K") }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
