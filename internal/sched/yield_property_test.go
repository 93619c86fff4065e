package sched_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// genWorld draws a busy fleet: running training of every kind (guaranteed,
// borrowed, within quota, young, non-preemptible, backfill-free), running
// inference, deployments wanting more, and a queue of pending jobs.
func genWorld(t *rapid.T) *world {
	w := &world{now: epoch.Add(24 * time.Hour)}
	size := rapid.SampledFrom([]int{4, 8}).Draw(t, "size")
	pods := rapid.IntRange(1, 3).Draw(t, "pods")
	per := rapid.IntRange(2, 6).Draw(t, "perPod")
	for p := 0; p < pods; p++ {
		for n := 0; n < per; n++ {
			w.nodes = append(w.nodes, model.Node{ID: fmt.Sprintf("n%02d", len(w.nodes)), Pod: fmt.Sprintf("pod-%d", p), Model: "H100",
				GPUs: size, CPUMilli: 1 << 30, MemoryMiB: 1 << 30, Health: model.HealthHealthy})
		}
	}
	w.quotas = []model.Quota{{Scope: "ml/a", GuaranteedGPUs: rapid.IntRange(0, 16).Draw(t, "guarA"), MaxGPUs: 0},
		{Scope: "ml/b", GuaranteedGPUs: 0, MaxGPUs: rapid.IntRange(8, 64).Draw(t, "maxB")}}
	teams := []string{"", "a", "b"}
	// Running work: fill nodes with random allocations.
	for i, n := range w.nodes {
		free := model.FullMask(n.GPUs)
		for free != 0 && rapid.IntRange(0, 3).Draw(t, "more") > 0 {
			k := rapid.IntRange(1, free.Count()).Draw(t, "k")
			var m model.GPUMask
			for _, g := range free.Indices()[:k] {
				m |= model.MaskOf(g)
			}
			free &^= m
			w.seq++
			id := fmt.Sprintf("r%d-%d", i, w.seq)
			if rapid.IntRange(0, 4).Draw(t, "inf") == 0 {
				w.allocs = append(w.allocs, model.Allocation{ID: "a" + id, NodeID: n.ID, GPUs: m, OwnerKind: model.OwnerInference, OwnerID: "svc", Replica: w.seq, CreatedAt: w.now.Add(-time.Hour)})
				continue
			}
			team := rapid.SampledFrom(teams).Draw(t, "team")
			j := model.Job{ID: id, Shape: model.Shape{GPUs: k, Topology: model.TopologyNode}, Priority: rapid.IntRange(0, 50).Draw(t, "prio"),
				Preemptible: rapid.Bool().Draw(t, "preemptible"), State: model.JobRunning,
				StartedAt: w.now.Add(-time.Duration(rapid.IntRange(1, 600).Draw(t, "age")) * time.Minute)}
			if team != "" {
				j.Org, j.Team = "ml", team
			}
			j.SubmittedAt = j.StartedAt
			j.EditRun().LastCheckpointAt = j.StartedAt
			if j.Preemptible {
				j.Checkpoint = &model.Checkpoint{Path: "/c", SizeBytes: int64(rapid.IntRange(1, 1000).Draw(t, "ckptGB")) * 1e9}
			}
			borrowed := j.Preemptible && (team == "b" || rapid.Bool().Draw(t, "borrowed"))
			w.jobs = append(w.jobs, j)
			w.allocs = append(w.allocs, model.Allocation{ID: "a" + id, NodeID: n.ID, GPUs: m, OwnerKind: model.OwnerTraining, OwnerID: id,
				Preemptible: j.Preemptible, Borrowed: borrowed, CreatedAt: j.StartedAt})
		}
	}
	w.deps = []model.Deployment{{ID: "svc", ReplicaShape: model.Shape{GPUs: rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "repGPUs"), Topology: model.TopologyNode},
		MinReplicas: rapid.IntRange(0, 3).Draw(t, "min"), MaxReplicas: 8, Desired: rapid.IntRange(0, 8).Draw(t, "desired"), Priority: 1000}}
	for i := rapid.IntRange(1, 8).Draw(t, "pending"); i > 0; i-- {
		topo := rapid.SampledFrom(model.Topologies).Draw(t, "topo")
		g := rapid.IntRange(1, size).Draw(t, "gpus")
		if topo != model.TopologyNode {
			g = rapid.IntRange(1, size*per).Draw(t, "gangGPUs")
		}
		j := model.Job{ID: fmt.Sprintf("p%d", i), Shape: model.Shape{GPUs: g, Topology: topo}, Priority: rapid.IntRange(0, 100).Draw(t, "pprio"),
			Preemptible: rapid.Bool().Draw(t, "ppre"), State: model.JobPending,
			SubmittedAt: w.now.Add(-time.Duration(rapid.IntRange(0, 300).Draw(t, "wait")) * time.Minute)}
		if team := rapid.SampledFrom(teams).Draw(t, "pteam"); team != "" {
			j.Org, j.Team = "ml", team
		}
		if j.Preemptible {
			j.Checkpoint = &model.Checkpoint{Path: "/c", SizeBytes: 1e9}
			if rapid.Bool().Draw(t, "short") {
				j.MaxRuntime = time.Duration(rapid.IntRange(5, 120).Draw(t, "maxrt")) * time.Minute
			}
		}
		w.jobs = append(w.jobs, j)
	}
	return w
}

// TestYieldProperties runs a few passes over random busy worlds and checks
// §7's rules and R2's on every decision.
func TestYieldProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(t)
		passes := rapid.IntRange(1, 4).Draw(t, "passes")
		for pass := 0; pass < passes; pass++ {
			s := w.state()
			d := sched.Plan(s, w.now)
			checkYield(t, w, s, d)
			w.apply(d)
			w.now = w.now.Add(time.Duration(rapid.IntRange(1, 30).Draw(t, "step")) * time.Minute)
			if rapid.Bool().Draw(t, "exits") {
				w.stopDone()
			}
		}
	})
}

func checkYield(t *rapid.T, w *world, s sched.State, d sched.Decision) {
	jobs := map[string]*model.Job{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = s.Jobs[i]
	}
	allocs := map[string]model.Allocation{}
	for _, a := range s.Allocations {
		allocs[a.ID] = a
	}
	cfg := sched.Config{}
	minRuntime := 10 * time.Minute

	// Never preempt inference, non-preemptible, guaranteed or young work.
	for _, p := range d.Preemptions {
		j := jobs[p.JobID]
		if j == nil {
			t.Fatalf("preempted %s, which is no job", p.JobID)
		}
		if !j.Preemptible {
			t.Fatalf("preempted non-preemptible %s", j.ID)
		}
		for _, id := range p.Allocations {
			a := allocs[id]
			if a.OwnerKind == model.OwnerInference {
				t.Fatalf("preempted inference allocation %s", id)
			}
			if a.Stopping {
				t.Fatalf("preempted %s twice", id)
			}
			guaranteed := !a.Borrowed && a.OwnerKind != model.OwnerBackfill && j.Team == "a" && w.quotas[0].GuaranteedGPUs > 0
			if guaranteed {
				t.Fatalf("preempted guaranteed-quota work %s", j.ID)
			}
			ownBackfill := a.OwnerKind == model.OwnerBackfill && a.Reservation == p.For
			if w.now.Sub(j.StartedAt) < minRuntime && !ownBackfill {
				t.Fatalf("preempted %s after %s, inside the minimum runtime", j.ID, w.now.Sub(j.StartedAt))
			}
			// Wait-for edges point down the total order: a training
			// beneficiary only preempts work ranked below it.
			if b := jobs[p.For]; b != nil && !ownBackfill {
				if !ranksAbove(b, j, w.now, cfg) {
					t.Fatalf("%s preempted %s, which does not rank below it", b.ID, j.ID)
				}
			}
		}
	}

	// No GPU in two places: running allocations, binds, held reservations.
	owner := map[string]string{}
	claim := func(node string, m model.GPUMask, who string) {
		for _, g := range m.Indices() {
			k := fmt.Sprintf("%s/%d", node, g)
			if prev, ok := owner[k]; ok {
				t.Fatalf("GPU %s is both %s and %s", k, prev, who)
			}
			owner[k] = who
		}
	}
	for _, a := range s.Allocations {
		claim(a.NodeID, a.GPUs, "allocation "+a.ID)
	}
	for _, b := range d.Binds {
		for _, pt := range b.Parts {
			claim(pt.Node, pt.GPUs, "bind "+b.OwnerID)
		}
	}
	for _, r := range d.Reservations {
		for _, pt := range r.Held {
			claim(pt.Node, pt.GPUs, "reservation "+r.Owner)
		}
	}

	// Quotas: after the binds, guaranteed use within guaranteed_gpus, all
	// use within max_gpus; borrowed binds are preemptible.
	used, guaranteed := map[string]int{}, map[string]int{}
	count := func(j *model.Job, gpus int, borrowed bool) {
		for _, sc := range j.Scopes() {
			used[sc] += gpus
			if !borrowed {
				guaranteed[sc] += gpus
			}
		}
	}
	for _, a := range s.Allocations {
		if j := jobs[a.OwnerID]; j != nil && a.OwnerKind != model.OwnerInference {
			count(j, a.GPUs.Count(), a.Borrowed || a.OwnerKind == model.OwnerBackfill)
		}
	}
	for _, b := range d.Binds {
		if b.Kind == model.OwnerInference {
			continue
		}
		if b.Borrowed && !b.Preemptible {
			t.Fatalf("bind %s borrows but is not preemptible", b.OwnerID)
		}
		count(jobs[b.OwnerID], b.GPUs(), b.Borrowed || b.Kind == model.OwnerBackfill)
	}
	for _, q := range w.quotas {
		startG, startU := 0, 0
		for _, a := range s.Allocations {
			if j := jobs[a.OwnerID]; j != nil && a.OwnerKind != model.OwnerInference && j.Org+"/"+j.Team == q.Scope {
				startU += a.GPUs.Count()
				if !a.Borrowed && a.OwnerKind != model.OwnerBackfill {
					startG += a.GPUs.Count()
				}
			}
		}
		// Only what this pass added is checked: the generated start state
		// may already break quotas, which no pass can undo.
		if guaranteed[q.Scope] > max(q.GuaranteedGPUs, startG) {
			t.Fatalf("scope %s: %d guaranteed GPUs in use, guarantee is %d", q.Scope, guaranteed[q.Scope], q.GuaranteedGPUs)
		}
		if q.MaxGPUs > 0 && used[q.Scope] > max(q.MaxGPUs, startU) {
			t.Fatalf("scope %s: %d GPUs in use, max is %d", q.Scope, used[q.Scope], q.MaxGPUs)
		}
	}

	checkMinimal(t, s, d)
}

func ranksAbove(a, b *model.Job, now time.Time, cfg sched.Config) bool {
	pa := a.Priority + a.PreemptCount*10 + int(now.Sub(a.Queued())/time.Hour)*5
	pb := b.Priority + b.PreemptCount*10
	if pa != pb {
		return pa > pb
	}
	if !a.SubmittedAt.Equal(b.SubmittedAt) {
		return a.SubmittedAt.Before(b.SubmittedAt)
	}
	return a.ID < b.ID
}

// checkMinimal: for every beneficiary, with all its victims (and what was
// already stopping) gone it fits; with any one victim kept, it does not.
func checkMinimal(t *rapid.T, s sched.State, d sched.Decision) {
	byFor := map[string][]sched.Preemption{}
	var order []string
	for _, p := range d.Preemptions {
		if byFor[p.For] == nil {
			order = append(order, p.For)
		}
		byFor[p.For] = append(byFor[p.For], p)
	}
	if len(order) != 1 {
		return // several beneficiaries share the pass: minimality is per search, checked below only when alone
	}
	forWhom := order[0]
	var req *model.Request
	for _, j := range s.Jobs {
		if j.ID == forWhom {
			r := j.Request()
			req = &r
		}
	}
	if req == nil {
		return // an inference replica; covered by the scenario tests
	}
	victims := byFor[forWhom]
	fits := func(skip int) bool {
		gone := map[string]bool{}
		for i, p := range victims {
			if i != skip {
				for _, id := range p.Allocations {
					gone[id] = true
				}
			}
		}
		var left []model.Allocation
		for _, a := range s.Allocations {
			if !gone[a.ID] && !a.Stopping {
				left = append(left, a)
			}
		}
		// Binds made earlier in the pass (inference, higher-ranked jobs)
		// hold their GPUs too.
		for _, b := range d.Binds {
			if b.Kind == model.OwnerBackfill && b.Reservation == forWhom {
				continue // its own backfill yields to it
			}
			for _, pt := range b.Parts {
				left = append(left, model.Allocation{NodeID: pt.Node, GPUs: pt.GPUs})
			}
		}
		// Other reservations keep what they hold and what they wait for.
		for _, r := range d.Reservations {
			if r.Owner == forWhom {
				continue
			}
			for _, pt := range append(append([]sched.Part(nil), r.Held...), r.Target...) {
				left = append(left, model.Allocation{NodeID: pt.Node, GPUs: pt.GPUs})
			}
		}
		ix := sched.NewIndex(s.Nodes, dedupe(left), s.Config)
		_, why := ix.Place(req, s.Config.Pools)
		return why == nil
	}
	if !fits(-1) {
		t.Fatalf("%s (%+v): with all %d victims gone it still does not fit\nreservations %+v\nbinds %+v\nallocations %+v", forWhom, req.Shape, len(victims), d.Reservations, d.Binds, s.Allocations)
	}
	for i := range victims {
		if fits(i) {
			var at string
			for _, r := range d.Reservations {
				if r.Owner == forWhom {
					at = fmt.Sprintf("%s target %v waits %v", r.At, r.Target, r.Waits)
				}
			}
			t.Fatalf("%s (%+v): fits without preempting %s; the victim set %+v is not minimal (reservation %s)\nallocations %+v",
				forWhom, req.Shape, victims[i].JobID, victims, at, s.Allocations)
		}
	}
}

// dedupe merges allocations per node so that overlapping claims (a
// reservation's held GPUs are also in its target) count once.
func dedupe(allocs []model.Allocation) []model.Allocation {
	byNode := map[string]model.GPUMask{}
	var order []string
	for _, a := range allocs {
		if _, ok := byNode[a.NodeID]; !ok {
			order = append(order, a.NodeID)
		}
		byNode[a.NodeID] |= a.GPUs
	}
	out := make([]model.Allocation, 0, len(order))
	for _, n := range order {
		out = append(out, model.Allocation{NodeID: n, GPUs: byNode[n]})
	}
	return out
}
