package sched_test

import (
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
	cfg         sched.Config
	seq         int
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (w *world) run(d *datadriven.TestData) (string, error) {
	a := args(d)
	switch d.Cmd {
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
		req := a.request(model.OwnerTraining)
		w.jobs = append(w.jobs, model.Job{ID: req.OwnerID, Shape: req.Shape, Priority: req.Priority, Preemptible: req.Preemptible,
			State: model.JobPending, SubmittedAt: epoch.Add(time.Duration(a.int("submit", len(w.jobs))) * time.Minute)})
		return "ok\n", nil
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
	case "plan":
		return w.plan(a.bool("apply"), a.bool("topology")), nil
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
	return sched.State{Nodes: w.nodes, Allocations: w.allocs, Jobs: w.jobs, Deployments: w.deps, Relocations: w.relocations, Config: w.cfg}
}

func (w *world) plan(apply, topo bool) string {
	d := sched.Plan(w.state(), epoch)
	var b strings.Builder
	for _, x := range d.Binds {
		fmt.Fprintf(&b, "bind %s %s", x.Kind, owner(x.OwnerID, x.Kind, x.Replica))
		fmt.Fprintf(&b, ": %s\n", placement(x.Placement))
	}
	for _, x := range d.Stops {
		fmt.Fprintf(&b, "stop %s#%d (%s)\n", x.OwnerID, x.Replica, strings.Join(x.Allocations, ","))
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
		fmt.Fprintf(&b, ": %s (%s): %s\n", x.Reason.Code, x.Reason.Constraint, x.Reason.Message)
	}
	if topo {
		b.WriteString(topology(d.Topology))
	}
	if apply {
		for _, x := range d.Binds {
			w.record(x.Kind, x.OwnerID, x.Replica, x.Preemptible, x.Placement)
			if x.Kind == model.OwnerTraining {
				for i := range w.jobs {
					if w.jobs[i].ID == x.OwnerID {
						w.jobs[i].State = model.JobRunning
					}
				}
			}
		}
		for _, x := range d.Stops {
			w.drop(x.Allocations)
		}
		for _, x := range d.Relocations {
			w.record(model.OwnerInference, x.Deployment, x.Replica, false, x.To)
			w.relocations = append(w.relocations, x)
		}
	}
	if b.Len() == 0 {
		return "nothing to do\n"
	}
	return b.String()
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
