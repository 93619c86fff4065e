package kube

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/sim"
)

// recorder is the berth policy of `berth sim` (the core, sched.PlanOn, on
// the engine's State) on the fleet as given, noting at every pass which
// jobs were present and what it bound.
type recorder struct {
	cfg    sched.Config
	passes []simPass
}

type simPass struct {
	at        time.Time
	present   []*model.Job // arrived and not done, in arrival order (the engine's records: read ids only)
	binds     []string
	allocs    []string // what the pass read as allocated
	waiting   int      // jobs pending when it ran
	preempted []string
}

func (r *recorder) Name() string { return "berth" }

func (r *recorder) Prepare(w *sim.Workload) ([]model.Node, sched.Config, string) {
	return w.Nodes, r.cfg, ""
}

func (r *recorder) Plan(v *sim.View, now time.Time) sched.Decision {
	d := sched.PlanOn(v.Index, v.State, now)
	present := slices.Clone(v.State.Jobs)
	slices.SortFunc(present, func(a, b *model.Job) int {
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	var allocs []string
	for _, a := range v.State.Allocations {
		allocs = append(allocs, fmt.Sprintf("%s %s %s", a.OwnerID, a.NodeID, formatGPUs(a.GPUs)))
	}
	slices.Sort(allocs)
	waiting := 0
	for _, j := range present {
		if j.State == model.JobPending {
			waiting++
		}
	}
	var preempted []string
	for _, pr := range d.Preemptions {
		preempted = append(preempted, pr.JobID)
	}
	r.passes = append(r.passes, simPass{at: now, present: present, binds: bindsOf(d), allocs: allocs, waiting: waiting, preempted: preempted})
	return d
}

// bindsOf is a decision's binds as "owner node gpus kind", sorted.
func bindsOf(d sched.Decision) []string {
	var out []string
	for _, b := range d.Binds {
		for _, pt := range b.Parts {
			out = append(out, fmt.Sprintf("%s %s %s %s", b.OwnerID, pt.Node, formatGPUs(pt.GPUs), b.Kind))
		}
	}
	slices.Sort(out)
	return out
}

// replayJob is one generated job and how it is written as pods.
type replayJob struct {
	spec   sim.JobSpec
	pods   int
	perPod int
}

// The same workload, replayed through `berth sim`'s engine and through
// the API server, makes the same placements at every pass: two leaves of
// four 8-GPU nodes and 40 training jobs of mixed shapes, topologies,
// priorities and declared runtimes arriving over a few hours. The sim run
// decides when jobs end (each runs its work from when it was bound); the
// replay creates each job's pods when the sim's pass first saw it,
// finishes them (phase Succeeded) when the sim's job is done, and runs a
// kube pass at each sim pass's time. So arrivals, completions, holds,
// backfill and the kept reservations all go through both.
//
// Aging by wait is off on both sides: a pod's submit time is its
// creationTimestamp, which the replay cannot set to the sim's (the order
// is the same: pods are created in arrival order, ties broken by id).
func TestReplayMakesTheSimsPlacements(t *testing.T) {
	e := newEnv(t)
	nodes := e.twoLeaves()
	shapes := []struct {
		pods, perPod int
		topo         model.Topology
	}{{1, 1, model.TopologyNode}, {1, 2, model.TopologyNode}, {1, 4, model.TopologyNode}, {1, 8, model.TopologyNode},
		{1, 3, model.TopologyNode}, {2, 8, model.TopologyPod}, {3, 8, model.TopologyPod}, {2, 4, model.TopologyPod},
		{4, 2, model.TopologyAny}, {6, 1, model.TopologyAny}}
	rng := rand.New(rand.NewPCG(23, 1))
	var jobs []replayJob
	var at time.Duration
	for i := range 40 {
		at += time.Duration(rng.IntN(15*60)) * time.Second
		sh := shapes[rng.IntN(len(shapes))]
		work := time.Duration(20+rng.IntN(220)) * time.Minute
		spec := sim.JobSpec{ID: fmt.Sprintf("%s/j%02d", e.ns, i), Submit: at, Work: work, Priority: rng.IntN(4),
			Shape: model.Shape{GPUs: sh.pods * sh.perPod, Topology: sh.topo, Worker: sh.perPod}}
		if i%2 == 0 {
			// Declared runtimes make backfill possible, which only
			// preemptible work may take.
			spec.MaxRuntime, spec.Preemptible, spec.CheckpointBytes = work+15*time.Minute, true, 1<<30
		}
		jobs = append(jobs, replayJob{spec: spec, pods: sh.pods, perPod: sh.perPod})
	}
	// Gangs of 16 and up hold GPUs (the default, 64, is this whole fleet).
	cfg := sched.Config{Aging: sched.Aging{MinGPUs: 1 << 20}, HoldMinGPUs: 16, MaxRelocations: -1}
	rec := &recorder{cfg: cfg}
	specs := make([]sim.JobSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.spec
	}
	if _, err := sim.Run(&sim.Workload{Name: "replay", Nodes: nodes, Jobs: specs}, rec, sim.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var now time.Time
	s := New(kc.cs, Config{Namespace: e.ns, Sched: cfg, Clock: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}}, 1)
	byID := map[string]replayJob{}
	for _, j := range jobs {
		byID[j.spec.ID] = j
	}
	created := map[string][]string{} // job id → its pods
	binds, waited, backfilled := 0, 0, 0
	for k, sp := range rec.passes {
		present := map[string]bool{}
		for _, j := range sp.present {
			present[j.ID] = true
		}
		for id, pods := range created {
			if !present[id] {
				for _, name := range pods {
					e.finish(name)
				}
				delete(created, id)
			}
		}
		for _, j := range sp.present {
			if _, ok := created[j.ID]; ok {
				continue
			}
			created[j.ID] = e.replayPods(byID[j.ID])
		}
		mu.Lock()
		now = sp.at
		mu.Unlock()
		d := e.pass(s)
		got := bindsOf(*d)
		if len(d.Preemptions) > 0 || len(sp.preempted) > 0 {
			t.Fatalf("pass %d at +%s: preemptions: the sim %v, berth kube %+v; this replay plays no kubelet to stop them", k, sp.at.Sub(sim.Epoch), sp.preempted, d.Preemptions)
		}
		if diff := strings.Join(sp.binds, "\n"); diff != strings.Join(got, "\n") {
			t.Fatalf("pass %d at +%s: the sim bound\n  %s\nberth kube bound\n  %s\nthe sim read\n  %s\nkube read\n  %s", k, sp.at.Sub(sim.Epoch),
				strings.Join(sp.binds, "\n  "), strings.Join(got, "\n  "), strings.Join(sp.allocs, "\n  "), strings.Join(e.allocated(), "\n  "))
		}
		binds += len(got)
		waited += sp.waiting
		for _, b := range got {
			if strings.HasSuffix(b, " backfill") {
				backfilled++
			}
		}
	}
	// The replay must exercise the queue, not only place onto an idle fleet.
	if binds < 40 || waited < 40 || len(rec.passes) < 20 || backfilled == 0 {
		t.Fatalf("the replay is too easy: %d passes, %d parts bound (%d backfilled), %d job-passes waiting", len(rec.passes), binds, backfilled, waited)
	}
	t.Logf("%d passes, %d parts bound (%d backfilled), %d job-passes waiting, all the same", len(rec.passes), binds, backfilled, waited)
}

// replayPods creates a job's pods: one per worker, the group annotations
// when there are several, the topology always, the declared runtime as
// activeDeadlineSeconds.
func (e *env) replayPods(j replayJob) []string {
	e.t.Helper()
	group := strings.TrimPrefix(j.spec.ID, e.ns+"/")
	opts := []podOpt{ann(AnnTopology, string(j.spec.Shape.Topology), AnnPriority, fmt.Sprint(j.spec.Priority))}
	if j.spec.MaxRuntime > 0 {
		secs := int64(j.spec.MaxRuntime / time.Second)
		opts = append(opts, func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = &secs })
	}
	if j.spec.Preemptible {
		opts = append(opts, ann(AnnPreemptible, "true", AnnCheckpoint, "s3://ckpt/"+group, AnnCheckpointBytes, fmt.Sprint(j.spec.CheckpointBytes)))
	}
	if j.pods == 1 {
		e.pod(group, j.perPod, opts...)
		return []string{group}
	}
	opts = append(opts, ann(AnnGroup, group, AnnGroupSize, fmt.Sprint(j.pods)))
	var names []string
	for i := range j.pods {
		name := fmt.Sprintf("%s-%d", group, i)
		e.pod(name, j.perPod, opts...)
		names = append(names, name)
	}
	return names
}

// finish ends a pod the way its kubelet would when the workload exits 0.
func (e *env) finish(name string) {
	e.t.Helper()
	p := e.get(name)
	p.Status.Phase = corev1.PodSucceeded
	if _, err := kc.cs.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// allocated is what the API server holds bound, as the sim's allocations
// read: "owner node gpus", sorted.
func (e *env) allocated() []string {
	l, err := kc.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: livePods})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, p := range l.Items {
		if p.Spec.NodeName != "" {
			g := p.Annotations[AnnGroup]
			if g == "" {
				g = p.Name
			}
			out = append(out, fmt.Sprintf("%s/%s %s %s", e.ns, g, p.Spec.NodeName, p.Annotations[AnnGPUs]))
		}
	}
	slices.Sort(out)
	return out
}
