package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/devstack"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/sim"
)

// BerthConfig is the berth under test.
type BerthConfig struct {
	Dir   string
	Nodes []model.Node
	Berth string
	// Workload sizes the shape pools the way `berth sim`'s berth policy
	// does (R1: from the deployments' declared max replicas and the
	// operator's small-pool setting, never from demand).
	Workload *sim.Workload
	Logger   *slog.Logger
}

// Berth is a running dev stack: a server on embedded etcd and one agent
// per node, in this process, spoken to only through the public API.
type Berth struct {
	cfg   BerthConfig
	opt   Options
	stack *devstack.Stack
	api   *client.Client

	mu      sync.Mutex
	created map[string]bool
}

// StartBerth brings the stack up with the core's time-based settings
// compressed by the replay's compression (the minimum runtime before a
// preemption, the starvation alert, the SLO's schedule-after, elastic
// growth) and the preemption budget's per-hour fractions scaled to
// match. Aging by hours waited does not compress (it counts whole
// hours); docs/slurm.md says so.
func StartBerth(ctx context.Context, cfg BerthConfig, opt Options) (*Berth, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pol, err := sim.NewPolicy("berth", 1)
	if err != nil {
		return nil, err
	}
	nodes, sc, _ := pol.Prepare(cfg.Workload)
	pools := map[string]string{}
	for _, n := range nodes {
		pools[n.ID] = n.Pool
	}
	sc = Compress(sc, opt.Compression)
	pods := map[string]bool{}
	for _, n := range cfg.Nodes {
		pods[n.Pod] = true
	}
	st, err := devstack.Start(ctx, devstack.Config{DataDir: cfg.Dir, Listen: "127.0.0.1:0", Nodes: len(cfg.Nodes), Pods: len(pods),
		GPUsPerNode: cfg.Nodes[0].GPUs, Model: cfg.Nodes[0].Model, NodePools: pools, Interval: time.Second, Sched: sc,
		Berth: cfg.Berth, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Berth{cfg: cfg, opt: opt, stack: st, api: st.API, created: map[string]bool{}}, nil
}

// Compress divides the core's durations by the compression and
// multiplies its per-hour budget fractions by it (zero fields take the
// core's defaults first).
func Compress(c sched.Config, by float64) sched.Config {
	d := c.WithDefaults()
	scale := func(v time.Duration) time.Duration { return time.Duration(float64(v) / by) }
	c.MinRuntime = scale(d.MinRuntime)
	c.RepeatMinRuntime = scale(d.RepeatMinRuntime)
	c.StarvationAfter = scale(d.StarvationAfter)
	c.GrowAfter = scale(d.GrowAfter)
	c.SLO.ScheduleAfter = scale(d.SLO.ScheduleAfter)
	c.Budget.Warn = d.Budget.Warn * by
	c.Budget.Page = d.Budget.Page * by
	return c
}

func (b *Berth) Name() string { return "berth" }

// Stop stops every workload, the agents and the server.
func (b *Berth) Stop() error { return b.stack.Stop() }

// Submit posts the job with the stand-in as its command; its checkpoint
// directory is its own.
func (b *Berth) Submit(ctx context.Context, j *sim.JobSpec) error {
	steps, stepTime, every := trainSteps(j, b.opt)
	req := api.JobRequest{Name: j.ID, Org: "peer", Team: team(j.Team), GPUs: j.Shape.GPUs, Topology: string(j.Shape.Topology),
		Priority: j.Priority, Preemptible: j.Preemptible,
		Checkpoint: &api.CheckpointRequest{Path: filepath.Join(b.cfg.Dir, "ck", j.ID), Bytes: j.CheckpointBytes},
		Command: []string{b.cfg.Berth, "workload", "train", "--steps", fmt.Sprint(steps), "--step-time", stepTime.String(),
			"--checkpoint-every", fmt.Sprint(every)}}
	if j.MaxRuntime > 0 {
		req.MaxRuntime = b.opt.Real(j.MaxRuntime).Round(time.Second).String()
	}
	_, err := b.api.SubmitJob(ctx, req, "peer-"+j.ID)
	return err
}

func team(t string) string {
	if t == "" {
		return "train"
	}
	return t
}

// Scale creates the deployment on first use (its declared min and max
// are the workload's), then sets its desired replicas.
func (b *Berth) Scale(ctx context.Context, s *sim.ServiceSpec, replicas int) error {
	b.mu.Lock()
	made := b.created[s.ID]
	b.mu.Unlock()
	if !made {
		dep := api.DeploymentRequest{Name: s.ID, Model: s.ID, Team: "serving", ReplicaShape: api.ReplicaShape{GPUs: s.Shape.GPUs, Topology: string(s.Shape.Topology)},
			MinReplicas: s.Min, MaxReplicas: s.Max, Command: []string{b.cfg.Berth, "workload", "serve"}}
		err := b.api.Do(ctx, http.MethodPost, "/v1/deployments", dep, nil)
		var se *client.StatusError
		if err != nil && !(errors.As(err, &se) && se.Status == http.StatusConflict) {
			return err
		}
		b.mu.Lock()
		b.created[s.ID] = true
		b.mu.Unlock()
	}
	_, err := b.api.Scale(ctx, s.ID, replicas)
	return err
}

// Poll lists every job (all pages), the deployments and the topology.
func (b *Berth) Poll(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{Jobs: map[string]JobView{}, Replicas: map[string]int{}}
	cont := ""
	for {
		q := url.Values{"limit": {"500"}}
		if cont != "" {
			q.Set("continue", cont)
		}
		var page api.JobList
		if err := b.api.Do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &page); err != nil {
			return snap, err
		}
		for _, j := range page.Jobs {
			snap.Jobs[j.Name] = berthView(j)
		}
		if page.Continue == "" {
			break
		}
		cont = page.Continue
	}
	var deps api.DeploymentList
	if err := b.api.Do(ctx, http.MethodGet, "/v1/deployments", nil, &deps); err != nil {
		return snap, err
	}
	for _, d := range deps.Deployments {
		snap.Replicas[d.ID] = d.Ready
	}
	t, err := b.api.Topology(ctx)
	if err != nil {
		return snap, err
	}
	// Not berth's own largest_placeable (which also leaves out what its
	// pools and holds keep back): the same function over GPUs in use per
	// node as Slurm's figure. A node missing from free_by_node takes
	// nothing now (drained, unhealthy).
	used, closed := map[string]int{}, map[string]bool{}
	for _, n := range b.cfg.Nodes {
		free, ok := t.FreeByNode[n.ID]
		if !ok {
			closed[n.ID] = true
			continue
		}
		used[n.ID] = n.GPUs - free
	}
	snap.Largest, snap.FreeNodes, snap.AllocatedGPUs = shapeOf(b.cfg.Nodes, used, closed)
	snap.AllocatedGPUs = t.AllocatedGPUs
	return snap, nil
}

func berthView(j api.Job) JobView {
	v := JobView{Restarts: j.PreemptCount}
	switch j.State {
	case model.JobRunning:
		v.State = Running
	case model.JobCompleted:
		v.State = Done
	case model.JobFailed, model.JobCancelled:
		v.State = Failed
	default:
		v.State = Pending
	}
	if v.State != Running {
		return v
	}
	seen := map[string]bool{}
	var parts []string
	for _, a := range j.Allocations {
		if !seen[a.NodeID] {
			seen[a.NodeID] = true
			v.Nodes = append(v.Nodes, a.NodeID)
		}
		parts = append(parts, a.NodeID+":"+a.GPUs.String())
	}
	sort.Strings(v.Nodes)
	sort.Strings(parts)
	v.Placement = strings.Join(parts, " ")
	return v
}
