package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Submit, list, show and cancel training jobs"}
	var conn connFlags
	conn.add(cmd)
	cmd.AddCommand(newJobSubmitCmd(&conn), newJobLsCmd(&conn), newJobShowCmd(&conn), newJobCancelCmd(&conn), newJobLogsCmd(&conn))
	return cmd
}

// readSpec reads a YAML or JSON file into an API request, strictly: YAML
// goes through JSON so the API's own decoder (unknown fields refused,
// named) judges it.
func readSpec(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-f: %w", err)
	}
	var generic any
	if err := yaml.Unmarshal(b, &generic); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	j, err := json.Marshal(generic)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := api.Decode(bytes.NewReader(j), into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func newJobSubmitCmd(conn *connFlags) *cobra.Command {
	var (
		req     api.JobRequest
		file    string
		ckpt    api.CheckpointRequest
		env     []string
		key     string
		out     outFlag
		elastic elasticFlags
	)
	cmd := &cobra.Command{
		Use:   "submit [flags] [-- command args...]",
		Short: "Submit a job from flags or a YAML/JSON file",
		Example: `  berth job submit --name pretrain --team research --gpus 32 --topology pod \
      --preemptible --checkpoint-path /ckpt/pretrain --checkpoint-bytes 200e9 \
      -- berth workload train --steps 3600
  berth job submit -f job.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			fromFlags := req
			if file != "" {
				// The file, then every flag given on top of it.
				var err error
				if req, err = readJobSpec(file); err != nil {
					return err
				}
				overrideFromFlags(cmd, &req, fromFlags)
			}
			if len(args) > 0 || file == "" {
				req.Command = args
			}
			if cmd.Flags().Changed("checkpoint-path") || cmd.Flags().Changed("checkpoint-bytes") || file == "" && (ckpt.Path != "" || ckpt.Bytes != 0) {
				if req.Checkpoint == nil {
					req.Checkpoint = &api.CheckpointRequest{}
				}
				if cmd.Flags().Changed("checkpoint-path") {
					req.Checkpoint.Path = ckpt.Path
				}
				if cmd.Flags().Changed("checkpoint-bytes") {
					req.Checkpoint.Bytes = ckpt.Bytes
				}
			}
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--env: %q: expected NAME=value", kv)
				}
				if req.Env == nil {
					req.Env = map[string]string{}
				}
				req.Env[k] = v
			}
			if err := elasticFromFlags(cmd, &req, elastic); err != nil {
				return err
			}
			if req.Image == "" { // inside an image, a relative path is the image's
				req.Command = absCommand(req.Command)
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			acc, err := c.SubmitJob(cmd.Context(), req, key)
			if err != nil {
				return err
			}
			return out.print(cmd.OutOrStdout(), acc, func(tw *tabwriter.Writer) {
				eta := "-"
				if acc.ETA != nil {
					eta = acc.ETA.Local().Format("15:04:05")
				}
				fmt.Fprintf(tw, "submitted %s: %s, queue position %d, eta %s\n", acc.JobID, acc.State, acc.QueuePosition, eta)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "filename", "f", "", "job spec as YAML or JSON: the fields of POST /v1/jobs, or what `job show -o yaml` prints; flags given too override it")
	f.StringVar(&req.Name, "name", "", "job name")
	f.StringVar(&req.Org, "org", "", "org (default: the server's default org)")
	f.StringVar(&req.Team, "team", "", "team")
	f.StringVar(&req.User, "user", "", "user")
	f.IntVar(&req.GPUs, "gpus", 0, "GPUs, all or nothing (a gang)")
	f.IntVar(&req.GPUMilli, "gpu-milli", 0, "a share of one GPU instead, 1-999 milli (with --gpus 1): the sharing pool, under MPS")
	f.StringVar(&req.MIGProfile, "mig-profile", "", "with --gpu-milli: a MIG instance of exactly this profile, e.g. 3g.40gb (--gpu-milli 428)")
	f.StringVar(&req.Topology, "topology", "node", "node (one NVLink domain), pod (one leaf switch) or any")
	f.StringVar(&req.GPUModel, "gpu-model", "", "GPU model, e.g. H100 (default: any)")
	f.Int64Var(&req.CPUMilli, "cpu-milli", 0, "CPU the job needs, in millicores (1000 = one core), across its nodes")
	f.Int64Var(&req.MemoryMiB, "memory-mib", 0, "memory the job needs, in MiB, across its nodes")
	f.IntVar(&req.Priority, "priority", 0, "priority; higher runs first")
	f.StringVar(&req.MaxRuntime, "max-runtime", "", "longest it may run, e.g. 4h (lets it backfill)")
	f.BoolVar(&req.Preemptible, "preemptible", false, "may be preempted (needs a checkpoint)")
	f.StringVar(&ckpt.Path, "checkpoint-path", "", "where the job checkpoints ($BERTH_CHECKPOINT_DIR)")
	f.Var(bytesFlag{&ckpt.Bytes}, "checkpoint-bytes", "checkpoint size (50e9, 50GB, 46.5GiB); sets the preemption deadline")
	f.StringVar(&req.Image, "image", "", "OCI image to run the command in (the agent runs it with podman; with no command after --, the image's entrypoint)")
	f.StringArrayVar(&env, "env", nil, "NAME=value for the job's environment (repeatable)")
	f.StringVar(&key, "idempotency-key", "", "retry-safe submit: the same key returns the same job")
	f.IntVar(&elastic.min, "elastic-min", 0, "elastic: the fewest GPUs the job runs at (whole 8-GPU nodes for pod and any, single GPUs of its one node for node); --gpus is then its maximum")
	f.IntSliceVar(&elastic.sizes, "elastic-sizes", nil, "elastic: the only sizes it runs at, ascending from --elastic-min to --gpus (e.g. 64,128,256)")
	out.add(cmd)
	return cmd
}

type elasticFlags struct {
	min   int
	sizes []int
}

// elasticFromFlags makes the job elastic when --elastic-min says so: it
// runs between that and --gpus.
func elasticFromFlags(cmd *cobra.Command, req *api.JobRequest, fl elasticFlags) error {
	if !cmd.Flags().Changed("elastic-min") {
		if cmd.Flags().Changed("elastic-sizes") {
			return fmt.Errorf("--elastic-sizes: needs --elastic-min")
		}
		return nil
	}
	req.Elastic = &model.Elastic{MinGPUs: fl.min, MaxGPUs: req.GPUs, Sizes: fl.sizes}
	return nil
}

// readJobSpec reads a job file: the fields of POST /v1/jobs, strictly, or
// a job as `berth job show -o yaml|json` prints it (it has a shape), so
// that a job can be resubmitted from what the CLI showed of it.
func readJobSpec(path string) (api.JobRequest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return api.JobRequest{}, fmt.Errorf("-f: %w", err)
	}
	var generic map[string]any
	if err := yaml.Unmarshal(b, &generic); err != nil {
		return api.JobRequest{}, fmt.Errorf("%s: %w", path, err)
	}
	if _, shown := generic["shape"]; !shown {
		var req api.JobRequest
		return req, readSpec(path, &req)
	}
	j, err := json.Marshal(generic)
	if err != nil {
		return api.JobRequest{}, fmt.Errorf("%s: %w", path, err)
	}
	var job api.Job
	if err := json.Unmarshal(j, &job); err != nil {
		return api.JobRequest{}, fmt.Errorf("%s: a shown job: %w", path, err)
	}
	return requestOf(job.Job), nil
}

// requestOf is the request that submits a job like j again.
func requestOf(j model.Job) api.JobRequest {
	r := api.JobRequest{Name: j.Name, Org: j.Org, Team: j.Team, User: j.User, GPUs: j.Shape.GPUs, GPUMilli: j.Shape.GPUMilli, MIGProfile: j.Shape.MIGProfile,
		Topology: string(j.Shape.Topology), CPUMilli: j.Shape.CPUMilli, MemoryMiB: j.Shape.MemoryMiB, Priority: j.Priority, Preemptible: j.Preemptible}
	if len(j.Shape.Models) > 0 {
		r.GPUModel = j.Shape.Models[0]
	}
	if j.MaxRuntime > 0 {
		r.MaxRuntime = j.MaxRuntime.String()
	}
	if c := j.Checkpoint; c != nil {
		r.Checkpoint = &api.CheckpointRequest{Path: c.Path, Bytes: c.SizeBytes}
		if c.Interval > 0 {
			r.Checkpoint.Interval = c.Interval.String()
		}
	}
	if w := j.Workload; w != nil {
		r.Command, r.Image, r.Env = w.Command, w.Image, w.Env
	}
	if e := j.Elastic; e != nil {
		r.Elastic = &model.Elastic{MinGPUs: e.MinGPUs, MaxGPUs: e.MaxGPUs, Sizes: e.Sizes}
	}
	return r
}

// overrideFromFlags puts the flags given on the command line over what a
// file said.
func overrideFromFlags(cmd *cobra.Command, req *api.JobRequest, fl api.JobRequest) {
	set := func(name string, apply func()) {
		if cmd.Flags().Changed(name) {
			apply()
		}
	}
	set("name", func() { req.Name = fl.Name })
	set("org", func() { req.Org = fl.Org })
	set("team", func() { req.Team = fl.Team })
	set("user", func() { req.User = fl.User })
	set("gpus", func() { req.GPUs = fl.GPUs })
	set("gpu-milli", func() { req.GPUMilli = fl.GPUMilli })
	set("mig-profile", func() { req.MIGProfile = fl.MIGProfile })
	set("topology", func() { req.Topology = fl.Topology })
	set("gpu-model", func() { req.GPUModel = fl.GPUModel })
	set("cpu-milli", func() { req.CPUMilli = fl.CPUMilli })
	set("memory-mib", func() { req.MemoryMiB = fl.MemoryMiB })
	set("priority", func() { req.Priority = fl.Priority })
	set("max-runtime", func() { req.MaxRuntime = fl.MaxRuntime })
	set("preemptible", func() { req.Preemptible = fl.Preemptible })
	set("image", func() { req.Image = fl.Image })
}

// countSet counts which of the named flags were set.
func countSet(cmd *cobra.Command, names ...string) int {
	n := 0
	for _, name := range names {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			n++
		}
	}
	return n
}

func newJobLsCmd(conn *connFlags) *cobra.Command {
	var team, state, kind string
	var all bool
	var limit int
	cmd := simple(conn, "ls", "List jobs, like squeue: id, team, GPUs, topology, state, age and why pending", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			q := url.Values{}
			if kind != "" {
				q.Set("kind", kind)
			}
			if team != "" {
				q.Set("team", team)
			}
			switch {
			case state != "":
				q.Set("state", state)
			case !all:
				// Like squeue: what is queued or running. Finished jobs
				// with --all or --state.
				q.Set("state", "pending,running")
			}
			jobs, err := listJobs(cmd.Context(), do, q, limit)
			if err != nil {
				return nil, nil, err
			}
			list := api.JobList{Jobs: jobs}
			return list, func(tw *tabwriter.Writer) {
				w := wide(cmd)
				if w {
					fmt.Fprintln(tw, "ID\tNAME\tTEAM\tGPUS\tTOPOLOGY\tSTATE\tAGE\tPRIORITY\tPREEMPTIBLE\tPREEMPTED\tOWNER\tSUBMITTED\tWHERE / WHY PENDING")
				} else {
					fmt.Fprintln(tw, "ID\tNAME\tTEAM\tGPUS\tTOPOLOGY\tSTATE\tAGE\tWHERE / WHY PENDING")
				}
				for _, j := range list.Jobs {
					where := ""
					switch {
					case j.PendingReason != nil:
						where = j.PendingReason.Message
					case len(j.Allocations) > 0:
						where = placedOn(j.Allocations)
					}
					since := j.SubmittedAt
					if !j.StartedAt.IsZero() {
						since = j.StartedAt
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t", j.ID, dash(j.Name), dash(j.Team), gpusOf(j.Shape.GPUs, j.Shape.GPUMilli), j.Shape.Topology, j.State, age(since))
					if w {
						prio := strconv.Itoa(j.Priority)
						if j.EffectivePrio != nil && j.EffectivePrio.Effective != j.Priority {
							prio += fmt.Sprintf(" (%d)", j.EffectivePrio.Effective)
						}
						fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%s\t", prio, j.Preemptible, j.PreemptCount, dash(j.Owner), j.SubmittedAt.Local().Format("01-02 15:04:05"))
					}
					fmt.Fprintf(tw, "%s\n", dash(where))
				}
			}, nil
		})
	cmd.Aliases = []string{"list"}
	cmd.Flags().StringVar(&team, "team", "", "only this team's jobs")
	cmd.Flags().StringVar(&state, "state", "", "only jobs in this state: pending, running, completed, failed, cancelled")
	cmd.Flags().StringVar(&kind, "kind", "", "only jobs of this kind: whole (whole GPUs) or share (a share of one GPU)")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "finished jobs too (completed, failed, cancelled)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many jobs, oldest first (0: every page)")
	return cmd
}

func newJobShowCmd(conn *connFlags) *cobra.Command {
	return simple(conn, "show JOB", "Show a job by id or by name: shape, state, allocations, why pending, effective priority, history", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string, do clientDo) (any, func(*tabwriter.Writer), error) {
			id, err := resolveJob(cmd.Context(), do, args[0])
			if err != nil {
				return nil, nil, err
			}
			var j api.Job
			if err := do(cmd.Context(), http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j); err != nil {
				return nil, nil, err
			}
			return j, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "job\t%s (%s)\n", j.ID, dash(j.Name))
				if len(j.Scopes()) > 0 {
					fmt.Fprintf(tw, "quota scope\t%s\n", api.Escape(j.Scopes()[len(j.Scopes())-1]))
				} else {
					fmt.Fprintf(tw, "quota scope\t- (no org or team: counts against no quota)\n")
				}
				fmt.Fprintf(tw, "submitted by\t%s\n", dash(j.Owner))
				fmt.Fprintf(tw, "shape\t%s, topology %s\n", countGPUs(j.Shape.GPUs, j.Shape.GPUMilli), j.Shape.Topology)
				if w := j.Workload; w != nil && w.Image != "" {
					fmt.Fprintf(tw, "image\t%s (a container)\n", api.Escape(w.Image))
				}
				if e := j.Elastic; e != nil {
					sizes := "every 8 GPUs"
					if j.Shape.Topology == model.TopologyNode {
						sizes = "every size, on its one node"
					}
					if len(e.Sizes) > 0 {
						sizes = fmt.Sprint(e.Sizes)
					}
					fmt.Fprintf(tw, "elastic\t%d to %d GPUs (%s); runs at %d now, resized %d times\n", e.MinGPUs, e.MaxGPUs, sizes, j.Size, j.Resizing().ResizeCount)
					for _, r := range j.Resizing().Resizes {
						fmt.Fprintf(tw, "  resize %s\t%d to %d GPUs: %s\n", r.At.Local().Format("15:04:05"), r.From, r.To, api.Escape(r.Why))
					}
				}
				fmt.Fprintf(tw, "state\t%s (submitted %s ago)\n", j.State, age(j.SubmittedAt))
				if j.Compacted {
					fmt.Fprintf(tw, "compacted\tfinished %s ago, past the server's job retention: read from its usage record (%.1f GPU-hours, waited %s)\n",
						age(j.FinishedAt), j.Run().GPUSeconds/3600, time.Duration(j.Run().WaitSeconds*float64(time.Second)).Round(time.Second))
				}
				fmt.Fprintf(tw, "priority\t%d, preemptible %v, preempted %d times\n", j.Priority, j.Preemptible, j.PreemptCount)
				if j.EffectivePrio != nil {
					p := j.EffectivePrio
					fmt.Fprintf(tw, "effective priority\t%d = %d base + %d for preemptions + %d for waiting\n", p.Effective, p.Base, p.Preemptions, p.Waiting)
				}
				if j.PendingReason != nil {
					fmt.Fprintf(tw, "why pending\t%s\n", j.PendingReason.Message)
				}
				if j.Reservation != nil {
					fmt.Fprintf(tw, "reservation\tholds %d of %d GPUs at %s\n", j.Reservation.HeldGPUs, j.Reservation.GPUs, j.Reservation.At)
				}
				if j.ETA != nil {
					fmt.Fprintf(tw, "eta\t%s\n", j.ETA.Local().Format("2006-01-02 15:04:05"))
				}
				for _, a := range j.Allocations {
					stop := ""
					if a.Stopping {
						stop = " (stopping: " + a.StopReason + ")"
					}
					fmt.Fprintf(tw, "allocation\t%s on %s GPUs %s%s\n", a.ID, a.NodeID, a.GPUs, stop)
				}
				if r := j.Run().Restore; r != "" {
					fmt.Fprintf(tw, "restores from\t%s\n", r)
				}
				for _, e := range j.History {
					fmt.Fprintf(tw, "  %s\t%s %s\n", e.At.Local().Format("15:04:05"), e.Event, e.Detail)
				}
			}, nil
		})
}

func newJobCancelCmd(conn *connFlags) *cobra.Command {
	var out outFlag
	cmd := &cobra.Command{
		Use:   "cancel JOB...",
		Short: "Cancel jobs: pending ones leave the queue, running ones stop (SIGTERM, then SIGKILL at the deadline)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := conn.client()
			if err != nil {
				return err
			}
			var done []api.Job
			for _, id := range args {
				j, err := c.CancelJob(cmd.Context(), id)
				if err != nil {
					if len(done) > 0 {
						var ok []string
						for _, d := range done {
							ok = append(ok, d.ID)
						}
						return fmt.Errorf("%s: %w (cancelled before it: %s)", id, err, strings.Join(ok, ", "))
					}
					return fmt.Errorf("%s: %w", id, err)
				}
				done = append(done, j)
			}
			return out.print(cmd.OutOrStdout(), done, func(tw *tabwriter.Writer) {
				for _, j := range done {
					fmt.Fprintf(tw, "%s\t%s\n", j.ID, j.State)
				}
			})
		},
	}
	out.add(cmd)
	return cmd
}

// absCommand makes a command given as ./prog or ../prog absolute: the
// user means their directory, and the agent runs the command elsewhere.
func absCommand(cmd []string) []string {
	if len(cmd) > 0 && (strings.HasPrefix(cmd[0], "./") || strings.HasPrefix(cmd[0], "../")) {
		if abs, err := filepath.Abs(cmd[0]); err == nil {
			cmd = append([]string{abs}, cmd[1:]...)
		}
	}
	return cmd
}

// gpusOf prints a GPU count, or a share of one GPU as "300m".
// countGPUs is "1 GPU", "8 GPUs", "300m of a GPU".
func countGPUs(gpus, milli int) string {
	if milli > 0 {
		return fmt.Sprintf("%dm of a GPU", milli)
	}
	return plural(gpus, "GPU")
}

// plural is "1 replica", "2 replicas".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func gpusOf(gpus, milli int) string {
	if milli > 0 {
		return fmt.Sprintf("%dm", milli)
	}
	return fmt.Sprint(gpus)
}

// resolveJob takes a job id, or a job's name among the jobs the token
// sees (its team's, or all for an admin): unfinished ones first, since a
// name is usually reused once the job it named is done.
func resolveJob(ctx context.Context, do clientDo, arg string) (string, error) {
	if strings.HasPrefix(arg, "j-") {
		return arg, nil
	}
	jobs, err := listJobs(ctx, do, url.Values{"name": {arg}}, 0)
	if err != nil {
		return "", err
	}
	var live, all []string
	for _, j := range jobs {
		if j.Name == arg {
			all = append(all, j.ID)
			if !j.State.Terminal() {
				live = append(live, j.ID)
			}
		}
	}
	switch {
	case len(live) == 1:
		return live[0], nil
	case len(live) > 1:
		return "", fmt.Errorf("job %s: %d unfinished jobs have that name (%s): give the id", api.Quote(arg), len(live), strings.Join(live, ", "))
	case len(all) == 1:
		return all[0], nil
	case len(all) > 1:
		return "", fmt.Errorf("job %s: %d finished jobs have that name (%s): give the id", api.Quote(arg), len(all), strings.Join(all, ", "))
	}
	return "", fmt.Errorf("job %s: no job with that id or name", api.Quote(arg))
}

// listJobs reads GET /v1/jobs page by page (the server pages at 500),
// stopping at max jobs when max > 0.
func listJobs(ctx context.Context, do clientDo, q url.Values, max int) ([]api.Job, error) {
	var out []api.Job
	for {
		if max > 0 {
			q.Set("limit", strconv.Itoa(min(max-len(out), 5000)))
		}
		var page api.JobList
		if err := do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Jobs...)
		if page.Continue == "" || max > 0 && len(out) >= max {
			return out, nil
		}
		q.Set("continue", page.Continue)
	}
}

// placedOn is where a job runs, its nodes in order (a gang's allocations
// come back in no particular order), consecutive nodes holding the same
// GPUs written as one range: n008-n011[0-7],n013[0-3].
func placedOn(allocs []model.Allocation) string {
	as := append([]model.Allocation(nil), allocs...)
	sort.Slice(as, func(i, k int) bool { return nodeLess(as[i].NodeID, as[k].NodeID) })
	var parts []string
	for i := 0; i < len(as); {
		k := i
		for k+1 < len(as) && as[k+1].GPUs == as[i].GPUs && nextNode(as[k].NodeID, as[k+1].NodeID) {
			k++
		}
		name := as[i].NodeID
		if k > i {
			name += "-" + as[k].NodeID
		}
		parts = append(parts, dash(name)+"["+as[i].GPUs.String()+"]")
		i = k + 1
	}
	return strings.Join(parts, ",")
}

// splitNode is a node name's prefix, trailing number and its digit count
// (n009: "n", 9, 3); the number is -1 without one.
func splitNode(s string) (string, int, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return s, -1, 0
	}
	return s[:i], n, len(s) - i
}

// nodeLess orders node names naturally: gpu-9 before gpu-10.
func nodeLess(a, b string) bool {
	pa, na, _ := splitNode(a)
	pb, nb, _ := splitNode(b)
	if pa != pb || na < 0 || nb < 0 {
		return a < b
	}
	return na < nb
}

// nextNode reports whether b is the node numbered right after a, with the
// same prefix and digit count (n009 then n010).
func nextNode(a, b string) bool {
	pa, na, wa := splitNode(a)
	pb, nb, wb := splitNode(b)
	return na >= 0 && pa == pb && wa == wb && nb == na+1
}
