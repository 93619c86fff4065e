package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

type devOptions struct {
	nodes, pods, gpus int
	pools             bool
	output            string
}

// newSimPlanCmd runs one pass of the scheduling core over a simulated
// fleet and a demo mix, with the topology view an operator would read: the
// core on its own, no server, no processes.
func newSimPlanCmd() *cobra.Command {
	o := devOptions{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Run one scheduling pass over a simulated fleet and show what it decided",
		Long: `plan builds a simulated fleet (default 16 nodes × 8 H100 in 2 pods),
submits a demo mix (a 32-GPU pod gang, a TP8 job, a sweep of 1-GPU jobs and
two inference deployments), runs berth's scheduling core over it and prints
the placements, the pending reasons and the topology view, largest_placeable
first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDev(cmd.OutOrStdout(), o) },
	}
	f := cmd.Flags()
	f.IntVar(&o.nodes, "nodes", 16, "nodes in the simulated fleet")
	f.IntVar(&o.pods, "pods", 2, "pods (leaf switches) the nodes are spread over")
	f.IntVar(&o.gpus, "gpus-per-node", 8, "GPUs per node (1-64)")
	f.BoolVar(&o.pools, "pools", false, "segregate the fleet into training, inference, small and swap pools (R1, R4)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	return cmd
}

func (o devOptions) validate() error {
	switch {
	case o.nodes < 1:
		return fmt.Errorf("--nodes: %d must be at least 1", o.nodes)
	case o.pods < 1 || o.pods > o.nodes:
		return fmt.Errorf("--pods: %d must be between 1 and --nodes (%d)", o.pods, o.nodes)
	case o.gpus < 1 || o.gpus > model.MaxGPUsPerNode:
		return fmt.Errorf("--gpus-per-node: %d must be between 1 and %d", o.gpus, model.MaxGPUsPerNode)
	case o.output != "table" && o.output != "json":
		return fmt.Errorf("--output: %q is not one of table, json", o.output)
	}
	return nil
}

func devFleet(o devOptions) []model.Node {
	perPod := (o.nodes + o.pods - 1) / o.pods
	nodes := make([]model.Node, o.nodes)
	for i := range nodes {
		nodes[i] = model.Node{ID: fmt.Sprintf("n%03d", i), Pod: fmt.Sprintf("pod-%c", 'a'+rune(i/perPod%26)), Model: "H100",
			GPUs: o.gpus, CPUMilli: int64(o.gpus) * 16000, MemoryMiB: int64(o.gpus) * 256 * 1024, Health: model.HealthHealthy, BootEpoch: 1}
	}
	return nodes
}

func devMix(now time.Time) ([]model.Job, []model.Deployment) {
	at := func(m int) time.Time { return now.Add(time.Duration(m-60) * time.Minute) }
	jobs := []model.Job{
		{ID: "pretrain-32", Org: "ml", Team: "research", Shape: model.Shape{GPUs: 32, Topology: model.TopologyPod}, Priority: 50, Preemptible: true,
			Checkpoint: &model.Checkpoint{Path: "/ckpt/pretrain-32", SizeBytes: 980e9}, State: model.JobPending, SubmittedAt: at(0)},
		{ID: "tp8-finetune", Org: "ml", Team: "nlp", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Priority: 40, Preemptible: true,
			Checkpoint: &model.Checkpoint{Path: "/ckpt/tp8-finetune", SizeBytes: 140e9}, State: model.JobPending, SubmittedAt: at(5)},
		{ID: "eval-16", Org: "ml", Team: "nlp", Shape: model.Shape{GPUs: 16, Topology: model.TopologyAny}, Priority: 20, Preemptible: true,
			Checkpoint: &model.Checkpoint{Path: "/ckpt/eval-16", SizeBytes: 10e9}, MaxRuntime: 2 * time.Hour, State: model.JobPending, SubmittedAt: at(8)},
	}
	for i := 0; i < 12; i++ {
		jobs = append(jobs, model.Job{ID: fmt.Sprintf("sweep-%02d", i), Org: "ml", Team: "rl", Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode},
			Priority: 10, Preemptible: true, Checkpoint: &model.Checkpoint{Path: "/ckpt/sweep", SizeBytes: 1e9}, MaxRuntime: 30 * time.Minute,
			State: model.JobPending, SubmittedAt: at(10 + i)})
	}
	deps := []model.Deployment{
		{ID: "chat-70b", Model: "llama-70b", ReplicaShape: model.Shape{GPUs: 4, Topology: model.TopologyNode}, MinReplicas: 4, MaxReplicas: 8, Desired: 6, Priority: 1000},
		{ID: "embed", Model: "e5-large", ReplicaShape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, MinReplicas: 2, MaxReplicas: 8, Desired: 4, Priority: 900},
	}
	return jobs, deps
}

func runDev(w io.Writer, o devOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	nodes := devFleet(o)
	jobs, deps := devMix(now)
	cfg := sched.Config{}
	if o.pools {
		cfg.Pools = sched.DefaultPools()
		labels, _ := sched.SizePools(nodes, deps, cfg.Pools, max(1, o.nodes/8))
		for i := range nodes {
			nodes[i].Pool = labels[nodes[i].ID]
		}
	}
	d := sched.Plan(sched.State{Nodes: nodes, Jobs: sched.JobsOf(jobs), Deployments: deps, Config: cfg}, now)
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	return printDecision(w, o, d)
}

func printDecision(w io.Writer, o devOptions, d sched.Decision) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	l := d.Topology.LargestPlaceable
	fmt.Fprintf(tw, "berth dev: one scheduling pass over %d nodes × %d GPUs in %d pods\n\n", o.nodes, o.gpus, o.pods)
	fmt.Fprintf(tw, "largest_placeable\tnode %d\tpod %d\tany %d\n", l.Node, l.Pod, l.Any)
	fmt.Fprintf(tw, "free GPUs\t%d\tfragmented %d\tfully free nodes %d\n\n", d.Topology.FreeGPUs, d.Topology.FragmentedGPUs, d.Topology.FreeNodesFull)
	fmt.Fprintln(tw, "POD\tFREE\tFULL NODES\tLARGEST")
	for _, p := range d.Topology.Pods {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", p.Pod, p.FreeGPUs, p.FreeNodesFull, p.Largest)
	}
	fmt.Fprintln(tw, "\nPLACED\tKIND\tGPUS\tWHERE")
	for _, b := range d.Binds {
		id := b.OwnerID
		if b.Kind == model.OwnerInference {
			id = fmt.Sprintf("%s#%d", b.OwnerID, b.Replica)
		}
		var where []string
		for _, p := range b.Parts {
			where = append(where, fmt.Sprintf("%s[%s]", p.Node, p.GPUs))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", id, b.Kind, b.GPUs(), strings.Join(where, " "))
	}
	if len(d.Reservations) > 0 {
		fmt.Fprintln(tw, "\nRESERVED FOR\tAT\tHELD IDLE\tOF\tBACKFILL")
		for _, r := range d.Reservations {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", r.Owner, r.At, r.HeldGPUs(), r.GPUs, strings.Join(r.Backfill, " "))
		}
	}
	if len(d.Pending) > 0 {
		fmt.Fprintln(tw, "\nPENDING\tKIND\tWHY")
		for _, p := range d.Pending {
			fmt.Fprintf(tw, "%s\t%s\t%s: %s\n", p.OwnerID, p.Kind, p.Reason.Code, p.Reason.Message)
		}
	}
	if len(d.Alerts) > 0 {
		fmt.Fprintln(tw, "\nALERT\tSEVERITY\tMESSAGE")
		for _, a := range d.Alerts {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", a.ID, a.Severity, a.Message)
		}
	}
	return tw.Flush()
}
