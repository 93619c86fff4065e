package sched_test

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/sched/schedtest"
)

// TestScenarios runs the files under testdata/scenarios. Each reads like
// one of the design's examples: build a fleet, place requests, look at the
// topology, run a Plan pass. Run with -rewrite to regenerate expectations
// after a deliberate change, then read the diff.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		w := &world{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := w.run(d)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			return out
		})
	})
}

// world is a scenario's state: the table a control loop would hold.
type world struct {
	nodes       []model.Node
	allocs      []model.Allocation
	jobs        []model.Job
	deps        []model.Deployment
	relocations []sched.Relocation
	quotas      []model.Quota
	res         []sched.Reservation
	recent      []sched.PreemptionRecord
	bandwidth   float64
	cfg         sched.Config
	seq         int
	now         time.Time
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (w *world) run(d *datadriven.TestData) (string, error) {
	a := args(d)
	if w.now.IsZero() {
		w.now = epoch
	}
	switch d.Cmd {
	case "advance":
		by, err := time.ParseDuration(a.str("by", "0s"))
		if err != nil {
			return "", err
		}
		w.now = w.now.Add(by)
		return fmt.Sprintf("now +%s\n", w.now.Sub(epoch)), nil
	case "quota":
		q := model.Quota{Scope: a.str("scope", ""), GuaranteedGPUs: a.int("guaranteed", 0), MaxGPUs: a.int("max", 0)}
		w.quotas = append(w.quotas, q)
		return "ok\n", q.Validate()
	case "storage":
		bw, err := strconv.ParseFloat(a.str("bw", "0"), 64)
		w.bandwidth = bw
		return "ok\n", err
	case "admit":
		req := a.request(model.OwnerTraining)
		j := model.Job{ID: req.OwnerID, Org: a.str("org", ""), Team: a.str("team", ""), Shape: req.Shape, Preemptible: req.Preemptible, State: model.JobPending}
		if a.bool("ckpt") {
			j.Checkpoint = &model.Checkpoint{Path: "/ckpt", SizeBytes: 1}
		}
		if err := sched.Admit(w.state(), j); err != nil {
			var q *sched.QuotaError
			if errors.As(err, &q) {
				return "rejected quota " + q.Scope + ": " + q.Message + "\n", nil
			}
			return "rejected " + err.Error() + "\n", nil
		}
		return "admitted\n", nil
	case "fill":
		return w.fill(a)
	case "expire":
		return w.expire(), nil
	case "recent":
		ago, err := time.ParseDuration(a.str("ago", "0s"))
		w.recent = append(w.recent, sched.PreemptionRecord{At: w.now.Add(-ago), JobID: "earlier", GPUs: a.int("gpus", 0), Running: a.int("running", 0),
			Reclaim: a.bool("reclaim")})
		return "ok\n", err
	case "stop":
		return w.stopDone(), nil
	case "finish":
		w.finish(a.str("id", ""))
		return "ok\n", nil
	case "fleet":
		w.nodes = append(w.nodes, schedtest.Fleet(schedtest.Spec{
			Pods: a.int("pods", 1), NodesPerPod: a.int("nodes", 1), GPUs: a.int("gpus", 8), Model: a.str("model", ""),
			Pool: a.str("pool", ""), CPUMilli: int64(a.int("cpu", 0)), MemoryMiB: int64(a.int("mem", 0)),
			FirstPod: a.int("first-pod", 0), FirstNode: len(w.nodes),
		})...)
		return fmt.Sprintf("%d nodes\n", len(w.nodes)), nil
	case "node":
		return "ok\n", w.editNode(a)
	case "links":
		n := w.node(a.str("node", ""))
		if n == nil {
			return "", fmt.Errorf("no node %q", a.str("node", ""))
		}
		m := &model.LinkMatrix{Links: make([][]int, n.GPUs)}
		for i := range m.Links {
			m.Links[i] = make([]int, n.GPUs)
		}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			var x, y, l int
			if _, err := fmt.Sscanf(line, "%d %d %d", &x, &y, &l); err != nil {
				return "", fmt.Errorf("links line %q: want 'gpu gpu links'", line)
			}
			m.Links[x][y], m.Links[y][x] = l, l
		}
		n.Links = m
		return "ok\n", n.Validate()
	case "pools":
		w.cfg.Pools = sched.Pools{Training: a.str("training", ""), Inference: a.str("inference", ""), Small: a.str("small", ""),
			Swap: a.str("swap", ""), SmallMaxGPUs: a.int("small-max", 4), InferenceMinGPUs: a.int("inference-min", 4),
			BorrowInference: a.bool("borrow")}
		return "ok\n", nil
	case "config":
		w.cfg.MaxRelocations = a.int("max-relocations", w.cfg.MaxRelocations)
		w.cfg.FragTarget = a.int("frag-target", w.cfg.FragTarget)
		w.cfg.SLO.MaxGPUs = a.int("slo-max-gpus", w.cfg.SLO.MaxGPUs)
		w.cfg.MaxHolds = a.int("max-holds", w.cfg.MaxHolds)
		w.cfg.HoldMinGPUs = a.int("hold-min-gpus", w.cfg.HoldMinGPUs)
		w.cfg.Standby = a.int("standby", w.cfg.Standby)
		if d := a.str("slo-schedule-after", ""); d != "" {
			v, err := time.ParseDuration(d)
			if err != nil {
				return "", err
			}
			w.cfg.SLO.ScheduleAfter = v
		}
		return "ok\n", nil
	case "place":
		req := a.request(model.OwnerTraining)
		ix := sched.NewIndex(w.nodes, w.allocs, w.cfg)
		pl, why := ix.Place(&req, w.cfg.Pools)
		if why != nil {
			return fmt.Sprintf("%s: %s (%s): %s\n", req.OwnerID, why.Code, why.Constraint, why.Message), nil
		}
		w.record(req.Kind, req.OwnerID, req.Replica, req.Preemptible || pl.Borrowed, pl)
		return fmt.Sprintf("%s: %s\n", req.OwnerID, placement(pl)), nil
	case "alloc":
		mask, err := model.ParseGPUMask(a.str("mask", ""))
		if err != nil {
			return "", err
		}
		req := a.request(model.OwnerTraining)
		w.record(req.Kind, req.OwnerID, req.Replica, req.Preemptible, sched.Placement{Parts: []sched.Part{{Node: a.str("node", ""), GPUs: mask}}})
		return "ok\n", nil
	case "release":
		id := a.str("id", "")
		kept := w.allocs[:0]
		for _, al := range w.allocs {
			if al.OwnerID != id {
				kept = append(kept, al)
			}
		}
		w.allocs = kept
		return "ok\n", nil
	case "job":
		return "ok\n", w.addJob(a)
	case "deploy":
		req := a.request(model.OwnerInference)
		w.deps = append(w.deps, model.Deployment{ID: req.OwnerID, ReplicaShape: req.Shape, MinReplicas: a.int("min", 0),
			MaxReplicas: a.int("max", 1), Desired: a.int("desired", 0), Priority: req.Priority})
		return "ok\n", nil
	case "scale":
		for i := range w.deps {
			if w.deps[i].ID == a.str("id", "") {
				w.deps[i].Desired = a.int("desired", 0)
				return "ok\n", nil
			}
		}
		return "", fmt.Errorf("no deployment %q", a.str("id", ""))
	case "accept":
		// An operator's accept_degraded choice, as the table keeps it.
		for i := range w.deps {
			if w.deps[i].ID == a.str("id", "") {
				w.deps[i].Accepted = &model.AcceptedDegraded{Want: a.int("want", 0), Have: a.int("have", 0), By: a.str("by", "ops"), At: w.now}
				return "ok\n", nil
			}
		}
		return "", fmt.Errorf("no deployment %q", a.str("id", ""))
	case "plan":
		return w.plan(a.bool("apply"), a.bool("topology"), a.bool("prio")), nil
	case "settle":
		return w.settle(), nil
	case "topology":
		return topology(sched.NewIndex(w.nodes, w.allocs, w.cfg).Summary(a.bool("nodes"))), nil
	}
	return "", fmt.Errorf("unknown command %q", d.Cmd)
}

func (w *world) node(id string) *model.Node {
	for i := range w.nodes {
		if w.nodes[i].ID == id {
			return &w.nodes[i]
		}
	}
	return nil
}

func (w *world) editNode(a kv) error {
	n := w.node(a.str("id", ""))
	if n == nil {
		return fmt.Errorf("no node %q", a.str("id", ""))
	}
	if v, ok := a["quarantine"]; ok {
		n.Quarantined = v == "" || v == "true"
	}
	if v, ok := a["drain"]; ok {
		n.Draining = v == "" || v == "true"
	}
	if v, ok := a["health"]; ok {
		n.Health = model.Health(v)
	}
	if v, ok := a["bad-gpus"]; ok {
		m, err := model.ParseGPUMask(v)
		if err != nil {
			return err
		}
		n.QuarantinedGPUs = m
	}
	if v, ok := a["pool"]; ok {
		n.Pool = v
	}
	return n.Validate()
}

func (w *world) record(kind model.OwnerKind, owner string, replica int, preemptible bool, pl sched.Placement) []string {
	var ids []string
	for _, pt := range pl.Parts {
		w.seq++
		id := fmt.Sprintf("a%d", w.seq)
		ids = append(ids, id)
		w.allocs = append(w.allocs, model.Allocation{ID: id, NodeID: pt.Node, GPUs: pt.GPUs, CPUMilli: pt.CPUMilli,
			MemoryMiB: pt.MemoryMiB, OwnerKind: kind, OwnerID: owner, Replica: replica, Preemptible: preemptible, Borrowed: pl.Borrowed})
	}
	return ids
}

func (w *world) state() sched.State {
	return sched.State{Nodes: w.nodes, Allocations: w.allocs, Jobs: sched.JobsOf(w.jobs), Deployments: w.deps, Relocations: w.relocations,
		Quotas: w.quotas, Reservations: w.res, RecentPreemptions: w.recent, StorageBandwidth: w.bandwidth, Config: w.cfg}
}

func (w *world) addJob(a kv) error {
	req := a.request(model.OwnerTraining)
	j := model.Job{ID: req.OwnerID, Org: a.str("org", ""), Team: a.str("team", ""), User: a.str("user", ""), Shape: req.Shape,
		Priority: req.Priority, Preemptible: req.Preemptible, State: model.JobPending,
		SubmittedAt: epoch.Add(time.Duration(a.int("submit", len(w.jobs))) * time.Minute), PreemptCount: a.int("preempted", 0)}
	if req.Preemptible {
		size, err := strconv.ParseFloat(a.str("ckpt", "100e9"), 64)
		if err != nil {
			return err
		}
		j.Checkpoint = &model.Checkpoint{Path: "/ckpt/" + j.ID, SizeBytes: int64(size)}
	}
	if v, ok := a["max-runtime"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		j.MaxRuntime = d
	}
	if v, ok := a["running"]; ok { // already running since `running` ago, on mask@node
		ago, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		j.State = model.JobRunning
		j.StartedAt = w.now.Add(-ago)
		j.EditRun().LastCheckpointAt = j.StartedAt
		if c, ok := a["ckpt-ago"]; ok {
			d, err := time.ParseDuration(c)
			if err != nil {
				return err
			}
			j.EditRun().LastCheckpointAt = w.now.Add(-d)
		}
		for _, on := range strings.Split(a.str("on", ""), ",") {
			mask, node, _ := strings.Cut(on, "@")
			m, err := model.ParseGPUMask(mask)
			if err != nil {
				return err
			}
			w.seq++
			w.allocs = append(w.allocs, model.Allocation{ID: fmt.Sprintf("a%d", w.seq), NodeID: node, GPUs: m, OwnerKind: model.OwnerTraining,
				OwnerID: j.ID, Preemptible: j.Preemptible, Borrowed: a.bool("borrowed"), CreatedAt: j.StartedAt})
		}
	}
	if err := j.Validate(); err != nil {
		return err
	}
	w.jobs = append(w.jobs, j)
	return nil
}

func (w *world) job(id string) *model.Job {
	for i := range w.jobs {
		if w.jobs[i].ID == id {
			return &w.jobs[i]
		}
	}
	return nil
}

// stopDone ends every preemption in flight: the jobs exit, their GPUs are
// released and they go back to the queue, as the control loop would do
// once agents confirm the exits.
func (w *world) stopDone() string {
	var b strings.Builder
	kept := w.allocs[:0]
	stopped := map[string]bool{}
	for _, al := range w.allocs {
		if al.Stopping {
			stopped[al.OwnerID] = true
			continue
		}
		kept = append(kept, al)
	}
	w.allocs = kept
	for i := range w.jobs {
		j := &w.jobs[i]
		if stopped[j.ID] {
			j.State, j.QueuedAt, j.StartedAt = model.JobPending, w.now, time.Time{}
			j.PreemptCount++
			fmt.Fprintf(&b, "%s exited, requeued (preempted %d times)\n", j.ID, j.PreemptCount)
		}
	}
	if b.Len() == 0 {
		return "nothing stopping\n"
	}
	return b.String()
}

// fill starts one running whole-node job per node of a pod: background load.
// Job i on the pod runs for runtime + i×stagger in all.
func (w *world) fill(a kv) (string, error) {
	runtime, err := time.ParseDuration(a.str("max-runtime", "0s"))
	if err != nil {
		return "", err
	}
	stagger, err := time.ParseDuration(a.str("stagger", "0s"))
	if err != nil {
		return "", err
	}
	ran, err := time.ParseDuration(a.str("running", "1h"))
	if err != nil {
		return "", err
	}
	ckptAgo, err := time.ParseDuration(a.str("ckpt-ago", a.str("running", "1h")))
	if err != nil {
		return "", err
	}
	busy := map[string]bool{}
	for _, al := range w.allocs {
		busy[al.NodeID] = true
	}
	n, count := 0, a.int("nodes", 1)
	for _, node := range w.nodes {
		if node.Pod != a.str("pod", "") || n == count || busy[node.ID] {
			continue
		}
		id := fmt.Sprintf("bg-%s", node.ID)
		j := model.Job{ID: id, Team: a.str("team", ""), Org: a.str("org", ""), Shape: model.Shape{GPUs: node.GPUs, Topology: model.TopologyNode},
			Priority: a.int("priority", 0), Preemptible: a.bool("preemptible"), State: model.JobRunning,
			SubmittedAt: w.now.Add(-ran), StartedAt: w.now.Add(-ran),
			RunRecord: &model.RunRecord{LastCheckpointAt: w.now.Add(-ckptAgo)}}
		if runtime > 0 {
			j.MaxRuntime = runtime + time.Duration(n)*stagger
		}
		if j.Preemptible {
			j.Checkpoint = &model.Checkpoint{Path: "/ckpt/" + id, SizeBytes: 10e9}
		}
		w.jobs = append(w.jobs, j)
		w.seq++
		w.allocs = append(w.allocs, model.Allocation{ID: fmt.Sprintf("a%d", w.seq), NodeID: node.ID, GPUs: model.FullMask(node.GPUs),
			OwnerKind: model.OwnerTraining, OwnerID: id, Preemptible: j.Preemptible, Borrowed: a.bool("borrowed"), CreatedAt: j.StartedAt})
		n++
	}
	return fmt.Sprintf("%d jobs running\n", n), nil
}

// expire ends every running job whose max_runtime has passed.
func (w *world) expire() string {
	var done []string
	for _, j := range w.jobs {
		if j.State == model.JobRunning && j.MaxRuntime > 0 && !j.StartedAt.Add(j.MaxRuntime).After(w.now) {
			done = append(done, j.ID)
		}
	}
	for _, id := range done {
		w.finish(id)
	}
	return fmt.Sprintf("%d jobs finished\n", len(done))
}

func (w *world) finish(id string) {
	kept := w.allocs[:0]
	for _, al := range w.allocs {
		if al.OwnerID != id {
			kept = append(kept, al)
		}
	}
	w.allocs = kept
	if j := w.job(id); j != nil {
		j.State = model.JobCompleted
	}
}

func (w *world) plan(apply, topo, prio bool) string {
	d := sched.Plan(w.state(), w.now)
	var b strings.Builder
	for _, x := range d.Binds {
		fmt.Fprintf(&b, "bind %s %s: %s", x.Kind, owner(x.OwnerID, x.Kind, x.Replica), placement(x.Placement))
		if x.Reservation != "" {
			fmt.Fprintf(&b, " inside %s", x.Reservation)
		}
		b.WriteString("\n")
	}
	for _, x := range d.Stops {
		fmt.Fprintf(&b, "stop %s#%d (%s)\n", x.OwnerID, x.Replica, strings.Join(x.Allocations, ","))
	}
	for _, x := range d.Preemptions {
		kind := ""
		if x.Backfill {
			kind = " backfill"
		}
		if x.Reclaim {
			kind += " reclaim"
		}
		fmt.Fprintf(&b, "preempt%s %s (%d GPUs, %s) for %s, deadline +%s, lost %.1f GPU-h\n", kind, x.JobID, x.GPUs,
			strings.Join(x.Allocations, ","), x.For, x.Deadline.Sub(w.now), x.LostGPUHours)
	}
	for _, x := range d.Reservations {
		fmt.Fprintf(&b, "reserve %s at %s: held %s", owner(x.Owner, x.Kind, x.Replica), x.At, parts(x.Held))
		if len(x.Target) > 0 {
			fmt.Fprintf(&b, " target %s", parts(x.Target))
		}
		if len(x.Waits) > 0 {
			fmt.Fprintf(&b, " waits %s", strings.Join(x.Waits, ","))
		}
		if !x.ETA.IsZero() {
			fmt.Fprintf(&b, " eta +%s", x.ETA.Sub(w.now))
		}
		b.WriteString("\n")
	}
	for _, x := range d.Relocations {
		fmt.Fprintf(&b, "relocate %s#%d from %s (%s) to %s for %s\n", x.Deployment, x.Replica, x.FromNode,
			strings.Join(x.From, ","), placement(x.To), x.For)
	}
	for _, x := range d.Pending {
		fmt.Fprintf(&b, "pending %s %s", x.Kind, owner(x.OwnerID, x.Kind, x.Replica))
		if x.Missing > 1 {
			fmt.Fprintf(&b, " (+%d more)", x.Missing-1)
		}
		if prio && x.Priority != nil {
			fmt.Fprintf(&b, " [priority %d = %d + %d preempted + %d waiting]", x.Priority.Effective, x.Priority.Base, x.Priority.Preemptions, x.Priority.Waiting)
		}
		fmt.Fprintf(&b, ": %s (%s): %s\n", x.Reason.Code, x.Reason.Constraint, x.Reason.Message)
	}
	for _, x := range d.Alerts {
		fmt.Fprintf(&b, "alert %s %s: %s\n", x.Severity, x.Kind, x.Message)
		if pg := x.Page; pg != nil {
			for _, a := range pg.Actions {
				fmt.Fprintf(&b, "  action %s: %s (%.1f GPU-h, %d replicas)\n", a.ID, a.Label, a.CostGPUHours, a.Replicas)
			}
		}
	}
	if topo {
		b.WriteString(topology(d.Topology))
	}
	if apply {
		w.apply(d)
	}
	if b.Len() == 0 {
		return "nothing to do\n"
	}
	return b.String()
}

// apply does what the control loop does with a decision.
func (w *world) apply(d sched.Decision) {
	for _, x := range d.Binds {
		ids := w.record(x.Kind, x.OwnerID, x.Replica, x.Preemptible, x.Placement)
		for i := range w.allocs {
			for _, id := range ids {
				if w.allocs[i].ID == id {
					w.allocs[i].Reservation = x.Reservation
					w.allocs[i].CreatedAt = w.now
				}
			}
		}
		if j := w.job(x.OwnerID); j != nil && x.Kind != model.OwnerInference {
			j.State, j.StartedAt = model.JobRunning, w.now
			j.EditRun().LastCheckpointAt = w.now
		}
	}
	for _, x := range d.Stops {
		w.drop(x.Allocations)
	}
	for _, x := range d.Preemptions {
		for i := range w.allocs {
			for _, id := range x.Allocations {
				if w.allocs[i].ID == id {
					w.allocs[i].Stopping, w.allocs[i].StopDeadline = true, x.Deadline
				}
			}
		}
		w.recent = append(w.recent, sched.PreemptionRecord{At: w.now, JobID: x.JobID, GPUs: x.GPUs})
	}
	for _, x := range d.Relocations {
		w.record(model.OwnerInference, x.Deployment, x.Replica, false, x.To)
		w.relocations = append(w.relocations, x)
	}
	w.res = d.Reservations
}

func parts(ps []sched.Part) string {
	if len(ps) == 0 {
		return "-"
	}
	return placement(sched.Placement{Parts: ps})
}

// settle finishes relocations in flight: the new replicas are ready, so the
// old allocations drain.
func (w *world) settle() string {
	var b strings.Builder
	for _, r := range w.relocations {
		w.drop(r.From)
		fmt.Fprintf(&b, "drained %s#%d on %s\n", r.Deployment, r.Replica, r.FromNode)
	}
	w.relocations = nil
	if b.Len() == 0 {
		return "nothing in flight\n"
	}
	return b.String()
}

func (w *world) drop(ids []string) {
	gone := map[string]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	kept := w.allocs[:0]
	for _, al := range w.allocs {
		if !gone[al.ID] {
			kept = append(kept, al)
		}
	}
	w.allocs = kept
}

func owner(id string, kind model.OwnerKind, replica int) string {
	if kind == model.OwnerInference {
		return fmt.Sprintf("%s#%d", id, replica)
	}
	return id
}

func placement(pl sched.Placement) string {
	var parts []string
	for _, pt := range pl.Parts {
		parts = append(parts, fmt.Sprintf("%s[%s]", pt.Node, pt.GPUs))
	}
	s := strings.Join(parts, " ")
	if pl.Pool != "" {
		s += " pool=" + pl.Pool
	}
	if pl.Borrowed {
		s += " borrowed"
	}
	return s
}

func topology(s sched.TopologySummary) string {
	var b strings.Builder
	l := s.LargestPlaceable
	fmt.Fprintf(&b, "largest_placeable: node=%d pod=%d any=%d\n", l.Node, l.Pod, l.Any)
	fmt.Fprintf(&b, "free_gpus=%d free_nodes_full=%d fragmented=%d\n", s.FreeGPUs, s.FreeNodesFull, s.FragmentedGPUs)
	for _, p := range s.Pods {
		fmt.Fprintf(&b, "  %s: free=%d full_nodes=%d largest=%d\n", p.Pod, p.FreeGPUs, p.FreeNodesFull, p.Largest)
	}
	if s.FreeByNode != nil {
		ids := make([]string, 0, len(s.FreeByNode))
		for id := range s.FreeByNode {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var parts []string
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%s=%d", id, s.FreeByNode[id]))
		}
		fmt.Fprintf(&b, "free_by_node: %s\n", strings.Join(parts, " "))
	}
	return b.String()
}

// kv is a command's key=value arguments.
type kv map[string]string

func args(d *datadriven.TestData) kv {
	a := kv{}
	for _, arg := range d.CmdArgs {
		a[arg.Key] = strings.Join(arg.Vals, ",")
	}
	return a
}

func (a kv) str(k, def string) string {
	if v, ok := a[k]; ok {
		return v
	}
	return def
}

func (a kv) int(k string, def int) int {
	if v, ok := a[k]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q is not a number", k, v))
		}
		return n
	}
	return def
}

func (a kv) bool(k string) bool { _, ok := a[k]; return ok }

func (a kv) request(kind model.OwnerKind) model.Request {
	if a.bool("inference") || a.str("kind", "") == "inference" {
		kind = model.OwnerInference
	}
	var models []string
	if m := a.str("models", ""); m != "" {
		models = strings.Split(m, ",")
	}
	return model.Request{
		Shape: model.Shape{GPUs: a.int("gpus", 1), Topology: model.Topology(a.str("topology", "node")), Models: models,
			CPUMilli: int64(a.int("cpu", 0)), MemoryMiB: int64(a.int("mem", 0))},
		Kind: kind, OwnerID: a.str("id", "x"), Replica: a.int("replica", 0), Priority: a.int("priority", 0),
		Preemptible: a.bool("preemptible"),
	}
}
