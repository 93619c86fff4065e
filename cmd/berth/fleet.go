package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/spf13/cobra"
)

// simple builds a command that calls the API and prints the answer.
func simple(conn *connFlags, use, short string, args cobra.PositionalArgs,
	call func(cmd *cobra.Command, args []string, c clientDo) (any, func(*tabwriter.Writer), error)) *cobra.Command {
	var out outFlag
	var w watchFlags
	cmd := &cobra.Command{Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			once := func(dst io.Writer) error {
				v, table, err := call(cmd, args, c.Do)
				if err != nil {
					return err
				}
				return out.print(dst, v, table)
			}
			if w.on {
				return w.loop(cmd, once)
			}
			return once(cmd.OutOrStdout())
		}}
	out.add(cmd)
	if strings.HasPrefix(use, "ls") || use == "topology" || use == "usage" {
		w.add(cmd)
	}
	return cmd
}

type clientDo = func(ctx context.Context, method, path string, body, out any, header ...string) error

func newDeployCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "deploy", Short: "Create, scale and list inference deployments"}
	var conn connFlags
	conn.add(cmd)
	var req api.DeploymentRequest
	var file string
	var desired int
	create := simple(&conn, "create [flags] [-- command args...]", "Create a deployment from flags or a YAML/JSON file", nil,
		func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			if file != "" {
				if cmd.Flags().NFlag() > countSet(cmd, "filename", "output", "server", "token") || len(args) > 0 {
					return nil, nil, fmt.Errorf("-f: give the deployment either as a file or as flags, not both")
				}
				req = api.DeploymentRequest{}
				if err := readSpec(file, &req); err != nil {
					return nil, nil, err
				}
			} else {
				req.Command = args
				if cmd.Flags().Changed("desired") {
					req.Desired = &desired
				}
			}
			req.Command = absCommand(req.Command)
			var created struct {
				ID         string         `json:"deployment_id"`
				Deployment api.Deployment `json:"deployment"`
			}
			if err := do(cmd.Context(), http.MethodPost, "/v1/deployments", req, &created); err != nil {
				return nil, nil, err
			}
			d := created.Deployment
			return created, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "deployment %s: %s of %s (%s), min %d max %d\n", d.ID, plural(d.Target, "replica"), countGPUs(d.ReplicaShape.GPUs, d.ReplicaShape.GPUMilli), d.ReplicaShape.Topology, d.MinReplicas, d.MaxReplicas)
			}, nil
		})
	f := create.Flags()
	f.StringVarP(&file, "filename", "f", "", "deployment spec as YAML or JSON (the fields of POST /v1/deployments)")
	f.StringVar(&req.Name, "name", "", "deployment name (its id)")
	f.StringVar(&req.Model, "model", "", "the model served")
	f.StringVar(&req.Team, "team", "", "owning team")
	f.IntVar(&req.ReplicaShape.GPUs, "gpus", 1, "GPUs per replica")
	f.IntVar(&req.ReplicaShape.GPUMilli, "gpu-milli", 0, "a share of one GPU per replica instead, 1-999 milli: the sharing pool, under MPS")
	f.StringVar(&req.ReplicaShape.MIGProfile, "mig-profile", "", "with --gpu-milli: a MIG instance of exactly this profile per replica, e.g. 1g.10gb (--gpu-milli 142)")
	f.StringVar(&req.ReplicaShape.Topology, "topology", "node", "replica topology: node, pod or any")
	f.StringVar(&req.ReplicaShape.GPUModel, "gpu-model", "", "GPU model (default: any)")
	f.IntVar(&req.MinReplicas, "min", 1, "replicas berth keeps whatever it costs (preempting training if it must)")
	f.IntVar(&req.MaxReplicas, "max", 1, "most replicas the autoscaler may ask for")
	f.IntVar(&desired, "desired", 0, "replicas wanted now (default: min)")
	f.IntVar(&req.Priority, "priority", 0, "priority among deployments")
	f.StringVar(&req.Image, "image", "", "OCI image to run the command in (the agent runs it with podman; with no command after --, the image's entrypoint)")
	var readyHTTP string
	var readyCmd []string
	f.StringVar(&readyHTTP, "ready-http", "", "readiness check: a path asked of the address the replica writes to $BERTH_ALLOC_DIR/addr (/healthz), or an http:// URL; 2xx-3xx is ready")
	f.StringSliceVar(&readyCmd, "ready-cmd", nil, "readiness check: a command (comma-separated words) that exits 0 when the replica serves")
	create.PreRun = func(*cobra.Command, []string) {
		if readyHTTP != "" || len(readyCmd) > 0 {
			req.Readiness = &model.Readiness{HTTP: readyHTTP, Command: readyCmd}
		}
	}

	scale := simple(&conn, "scale DEPLOYMENT REPLICAS", "Set a deployment's desired replicas (clamped into [min, max])", cobra.ExactArgs(2),
		func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return nil, nil, fmt.Errorf("REPLICAS: %q: expected a whole number", args[1])
			}
			var d api.Deployment
			if err := do(cmd.Context(), http.MethodPatch, "/v1/deployments/"+url.PathEscape(args[0]), api.ScaleRequest{Desired: &n}, &d); err != nil {
				return nil, nil, err
			}
			return d, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s: desired %d, target %d, running %d\n", d.ID, d.Desired, d.Target, d.Actual)
			}, nil
		})
	ls := simple(&conn, "ls", "List deployments: desired, target, actual, min, max", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var list api.DeploymentList
			if err := do(cmd.Context(), http.MethodGet, "/v1/deployments", nil, &list); err != nil {
				return nil, nil, err
			}
			return list, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tTEAM\tGPUS/REPLICA\tDESIRED\tTARGET\tACTUAL\tSTANDBY\tREADY\tSTOPPING\tMIN\tMAX\tWHY SHORT")
				for _, d := range list.Deployments {
					why := ""
					if d.Pending != nil {
						why = d.Pending.Message
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", d.ID, dash(d.Team), gpusOf(d.ReplicaShape.GPUs, d.ReplicaShape.GPUMilli), d.Desired, d.Target, d.Actual, d.Standby, d.Ready, d.Stopping, d.MinReplicas, d.MaxReplicas, dash(why))
				}
			}, nil
		})
	ls.Aliases = []string{"list"}
	del := simple(&conn, "delete DEPLOYMENT", "Delete a deployment: its replicas stop (an autoscaler token for it reaches nothing after)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			if err := do(cmd.Context(), http.MethodDelete, "/v1/deployments/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return nil, nil, err
			}
			out := map[string]string{"deleted": args[0]}
			return out, func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "deleted %s: its replicas stop\n", args[0]) }, nil
		})
	del.Aliases = []string{"rm"}
	cmd.AddCommand(create, scale, ls, del, newDeployLogsCmd(&conn))
	return cmd
}

func newTopologyCmd() *cobra.Command {
	var conn connFlags
	cmd := simple(&conn, "topology", "What the fleet can still place: largest_placeable first, then each pod's free map", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var t api.Topology
			if err := do(cmd.Context(), http.MethodGet, "/v1/cluster/topology", nil, &t); err != nil {
				return nil, nil, err
			}
			return t, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "largest_placeable\tnode %d\tpod %d\tany %d\n", t.LargestPlaceable.Node, t.LargestPlaceable.Pod, t.LargestPlaceable.Any)
				util := 0.0
				if t.TotalGPUs > 0 {
					util = 100 * float64(t.AllocatedGPUs) / float64(t.TotalGPUs)
				}
				fmt.Fprintf(tw, "utilization\t%.1f%% (%d of %d GPUs)\n", util, t.AllocatedGPUs, t.TotalGPUs)
				frag := fmt.Sprintf("%d free GPUs no %d-GPU node request can use", t.FragmentedGPUs, t.FragTarget)
				if t.SharedFreeMilli > 0 {
					// The figure counts milli left on shared GPUs too: say so,
					// or a fleet of shares reads 100% of "0 free GPUs".
					frag += fmt.Sprintf(", plus %d milli on shared GPUs no whole-GPU request can use", t.SharedFreeMilli)
				}
				fmt.Fprintf(tw, "fragmentation\t%.1f%% (%s)\n", 100*t.Fragmentation, frag)
				fmt.Fprintf(tw, "whole free nodes\t%d\n", t.FreeNodesFull)
				fmt.Fprintf(tw, "shared GPUs\t%d (%d milli free on them; largest share placeable %d milli)\n", t.SharedGPUs, t.SharedFreeMilli, t.LargestShare)
				how := "measured from reported checkpoints"
				if !t.Measured {
					how = "assumed: no checkpoint reported yet"
				}
				fmt.Fprintf(tw, "checkpoint storage\t%.1f GB/s, %s (preemption stops below %.1f GB/s)\n\n", t.CheckpointBandwidth/1e9, how, t.CheckpointFloor/1e9)
				fmt.Fprintln(tw, "POD\tFREE GPUS\tWHOLE FREE NODES\tLARGEST PLACEABLE")
				for _, p := range t.Pods {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", p.Pod, p.FreeGPUs, p.FreeNodesFull, p.Largest)
				}
				var partial []string
				for n, free := range t.FreeByNode {
					partial = append(partial, fmt.Sprintf("%s:%d", n, free))
				}
				sort.Strings(partial)
				if len(partial) > 0 {
					fmt.Fprintf(tw, "\nfree by node\t%s\n", strings.Join(partial, " "))
				}
			}, nil
		})
	conn.add(cmd)
	return cmd
}

func newNodesCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "nodes", Short: "List nodes; drain, undrain, quarantine or unquarantine one"}
	var conn connFlags
	conn.add(cmd)
	ls := simple(&conn, "ls", "List nodes: pod, model, GPUs free, health, epoch, last heartbeat", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var list api.NodeList
			if err := do(cmd.Context(), http.MethodGet, "/v1/nodes", nil, &list); err != nil {
				return nil, nil, err
			}
			return list, func(tw *tabwriter.Writer) {
				w := wide(cmd)
				head := "NODE\tPOD\tPOOL\tMODEL\tGPUS\tFREE\tALLOCATED\tHEALTH\tFLAGS\tEPOCH\tLAST HEARTBEAT"
				if w {
					head += "\tCPU\tMEMORY\tNODE UUID\tBOOT ID"
				}
				fmt.Fprintln(tw, head)
				for _, n := range list.Nodes {
					var flags []string
					if n.Draining {
						flags = append(flags, "draining")
					}
					if n.Quarantined {
						flags = append(flags, "quarantined")
					}
					if n.QuarantinedGPUs != 0 {
						flags = append(flags, "quarantined GPUs "+n.QuarantinedGPUs.String())
					}
					if c := n.IdentityChange; c != nil && time.Since(c.At) < 24*time.Hour {
						// R5: a new machine or a new boot; its work was requeued.
						flags = append(flags, fmt.Sprintf("%s %s ago (%d invalidated)", c.Reason, age(c.At), c.Invalidated))
					}
					health := string(n.Health)
					if q := n.QuarantinedGPUs.Count(); q > 0 && n.Health == model.HealthHealthy {
						// Up, but short of GPUs: say so where an operator looks.
						health = fmt.Sprintf("degraded (%d of %d GPUs quarantined)", q, n.GPUs)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s", n.ID, n.Pod, dash(n.Pool), n.Model, n.GPUs, n.FreeGPUs, dash(n.AllocatedMask),
						health, dash(strings.Join(flags, ",")), n.BootEpoch, age(n.LastHeartbeat))
					if w {
						fmt.Fprintf(tw, "\t%dm\t%dMi\t%s\t%s", n.CPUMilli, n.MemoryMiB, dash(n.NodeUUID), dash(n.BootID))
					}
					fmt.Fprintln(tw)
				}
			}, nil
		})
	ls.Aliases = []string{"list"}
	cmd.AddCommand(ls)
	for action, short := range map[string]string{
		"drain":        "Stop placing new work on a node (running work stays)",
		"undrain":      "Place work on a node again",
		"quarantine":   "Fence a node: nothing new lands there and its work moves elsewhere",
		"unquarantine": "Lift a quarantine (node and GPUs)",
	} {
		cmd.AddCommand(simple(&conn, action+" NODE", short, cobra.ExactArgs(1),
			func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
				var n api.Node
				if err := do(cmd.Context(), http.MethodPost, "/v1/nodes/"+url.PathEscape(args[0])+"/"+action, nil, &n); err != nil {
					return nil, nil, err
				}
				return n, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "%s: %s (draining %v, quarantined %v)\n", n.ID, action, n.Draining, n.Quarantined)
				}, nil
			}))
	}
	return cmd
}

func newQuotaCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "quota", Short: "List and set hierarchical quotas (org, org/team, org/team/user)"}
	var conn connFlags
	conn.add(cmd)
	ls := simple(&conn, "ls", "List quotas with their use and borrowing", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var list api.QuotaList
			if err := do(cmd.Context(), http.MethodGet, "/v1/quotas", nil, &list); err != nil {
				return nil, nil, err
			}
			return list, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "SCOPE\tGUARANTEED\tMAX\tUSED\tBORROWED")
				for _, q := range list.Quotas {
					max := "-"
					if q.MaxGPUs > 0 {
						max = strconv.Itoa(q.MaxGPUs)
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", q.Scope, q.GuaranteedGPUs, max, q.UsedGPUs, q.BorrowedGPUs)
				}
			}, nil
		})
	ls.Aliases = []string{"list"}
	var req api.QuotaRequest
	set := simple(&conn, "set SCOPE", "Set a scope's guaranteed GPUs and cap", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var q api.Quota
			parts := strings.Split(args[0], "/")
			for i := range parts {
				parts[i] = url.PathEscape(parts[i])
			}
			if err := do(cmd.Context(), http.MethodPut, "/v1/quotas/"+strings.Join(parts, "/"), req, &q); err != nil {
				return nil, nil, err
			}
			return q, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s: guaranteed %d, max %d\n", q.Scope, q.GuaranteedGPUs, q.MaxGPUs)
			}, nil
		})
	set.Flags().IntVar(&req.GuaranteedGPUs, "guaranteed", 0, "GPUs the scope always gets (never preempted)")
	set.Flags().IntVar(&req.MaxGPUs, "max", 0, "cap on the scope's GPUs, borrowing included (0: none)")
	cmd.AddCommand(ls, set)
	return cmd
}

func newAlertsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "alerts", Short: "List alerts and pages; take a page's action"}
	var conn connFlags
	conn.add(cmd)
	ls := simple(&conn, "ls", "List alerts, open first; pages with their priced options", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var list struct {
				Alerts []control.AlertRecord `json:"alerts"`
			}
			if err := do(cmd.Context(), http.MethodGet, "/v1/alerts", nil, &list); err != nil {
				return nil, nil, err
			}
			return list, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tSEVERITY\tKIND\tSTATE\tRAISED\tMESSAGE")
				for _, a := range list.Alerts {
					state := "open"
					if a.ResolvedAt != nil {
						state = "resolved"
					}
					if a.Choice != nil {
						state = a.Choice.Action + " by " + a.Choice.By
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%s\n", a.ID, a.Severity, a.Kind, state, age(a.RaisedAt), a.Message)
					if p := a.Page; p != nil && a.ResolvedAt == nil {
						for _, o := range p.Actions {
							fmt.Fprintf(tw, "\t\t\t\t\t  option %s: %s (%.1f GPU-h of training progress)\n", o.ID, o.Label, o.CostGPUHours)
						}
					}
				}
			}, nil
		})
	ls.Aliases = []string{"list"}
	act := simple(&conn, "act ALERT ACTION", "Take a page's action: raise_budget, preempt or accept_degraded", cobra.ExactArgs(2),
		func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			var rec control.AlertRecord
			path := "/v1/alerts/" + url.PathEscape(args[0]) + "/actions/" + url.PathEscape(args[1])
			if err := do(cmd.Context(), http.MethodPost, path, nil, &rec); err != nil {
				return nil, nil, err
			}
			return rec, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s: %s taken\n", rec.ID, args[1])
			}, nil
		})
	cmd.AddCommand(ls, act)
	return cmd
}
