package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched/schedtest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

// With MaxBinds, the pass walks the queue in rank order until it has
// placed that many allocations, and the rest wait with a reason that
// names the cap: not placed, not held for, not made room for. A gang
// that starts below the cap is placed whole though it crosses it, and
// nothing grows while the queue waits. Without the cap the same pass
// places every job that fits.
func TestMaxBindsEndsTheQueueWalk(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := State{Nodes: schedtest.Fleet(schedtest.Spec{Pods: 1, NodesPerPod: 8, GPUs: 8})}
	// An elastic job running at its minimum on node 7, which could grow
	// onto the free GPUs beside it.
	el := &model.Job{ID: "elastic", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Elastic: &model.Elastic{MinGPUs: 4, MaxGPUs: 8},
		Size: 4, State: model.JobRunning, SubmittedAt: now.Add(-3 * time.Hour), StartedAt: now.Add(-2 * time.Hour),
		ResizeRecord: &model.ResizeRecord{ResizedAt: now.Add(-2 * time.Hour)}}
	s.Jobs = append(s.Jobs, el)
	s.Allocations = append(s.Allocations, model.Allocation{ID: "a-elastic", NodeID: schedtest.NodeName(7), GPUs: model.FullMask(4),
		OwnerKind: model.OwnerTraining, OwnerID: "elastic", CreatedAt: now.Add(-2 * time.Hour)})
	// Highest priority first: three 1-GPU jobs, a 16-GPU gang (two
	// allocations), then ten 1-GPU jobs.
	add := func(id string, gpus, prio int, topo model.Topology) {
		s.Jobs = append(s.Jobs, &model.Job{ID: id, Shape: model.Shape{GPUs: gpus, Topology: topo}, Priority: prio,
			State: model.JobPending, SubmittedAt: now.Add(-time.Minute)})
	}
	for i := range 3 {
		add(fmt.Sprintf("first-%d", i), 1, 90, model.TopologyNode)
	}
	add("gang", 16, 80, model.TopologyAny)
	for i := range 10 {
		add(fmt.Sprintf("later-%02d", i), 1, 70, model.TopologyNode)
	}

	all := Plan(s, now)
	if len(all.Binds) < 14 {
		t.Fatalf("without a cap: %d binds, want all 14 queued jobs placed (and maybe growth): %+v", len(all.Binds), all.Binds)
	}

	s.Config.MaxBinds = 4
	d := Plan(s, now)
	var bound []string
	parts := 0
	for _, b := range d.Binds {
		bound = append(bound, b.OwnerID)
		parts += len(b.Parts)
		if b.Grow {
			t.Errorf("%s grew while the queue waited at the cap", b.OwnerID)
		}
	}
	if want := fmt.Sprint([]string{"first-0", "first-1", "first-2", "gang"}); fmt.Sprint(bound) != want {
		t.Fatalf("bound %v, want %v", bound, want)
	}
	if parts < 4 {
		t.Errorf("%d allocations placed, want the gang whole past the cap", parts)
	}
	if len(d.Pending) != 10 {
		t.Fatalf("pending %d, want the ten later jobs", len(d.Pending))
	}
	for i, p := range d.Pending {
		if p.OwnerID != fmt.Sprintf("later-%02d", i) {
			t.Errorf("pending[%d] is %s, want later-%02d (rank order)", i, p.OwnerID, i)
		}
		if p.Reason == nil || p.Reason.Constraint != "max_binds_per_pass" {
			t.Errorf("%s's reason %+v, want one naming max_binds_per_pass", p.OwnerID, p.Reason)
		}
		if p.Priority == nil || p.Priority.Base != 70 {
			t.Errorf("%s's priority %+v, want base 70", p.OwnerID, p.Priority)
		}
	}
	if len(d.Preemptions) != 0 || len(d.Reservations) != 0 {
		t.Errorf("preemptions %+v, reservations %+v: want none for jobs the pass did not reach", d.Preemptions, d.Reservations)
	}
}

// TestMaxBindsIsAPrefix: a capped pass decides what the uncapped pass
// decides up to the cap and nothing after it. Its training binds are the
// first of the uncapped pass's, in order, up to the first at which the
// pass had placed MaxBinds allocations; its inference binds are the same;
// every job it did not reach is pending with the cap's reason.
func TestMaxBindsIsAPrefix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, cfg := genFleet(t, rapid.Bool().Draw(t, "pooled"))
		jobs, deps := genWork(t, 16, 2)
		s := State{Nodes: nodes, Jobs: JobsOf(jobs), Deployments: deps, Config: cfg}
		now := time.Unix(1000, 0)
		all := Plan(s, now)
		s.Config.MaxBinds = rapid.IntRange(1, 12).Draw(t, "cap")
		capped := Plan(s, now)

		split := func(d Decision) (inf, train []Bind, parts []int) {
			n := 0
			for _, b := range d.Binds {
				if b.Kind == model.OwnerInference {
					inf = append(inf, b)
				} else {
					train = append(train, b)
				}
				n += len(b.Parts)
				if b.Kind != model.OwnerInference {
					parts = append(parts, n) // allocations placed up to and with this bind
				}
			}
			return inf, train, parts
		}
		allInf, allTrain, _ := split(all)
		capInf, capTrain, capParts := split(capped)
		if diff := cmp.Diff(allInf, capInf, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("inference binds differ under the cap:\n%s", diff)
		}
		if len(capTrain) > len(allTrain) {
			t.Fatalf("capped pass bound %d training jobs, uncapped %d", len(capTrain), len(allTrain))
		}
		if diff := cmp.Diff(allTrain[:len(capTrain)], capTrain, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("capped training binds are not the uncapped pass's first ones:\n%s", diff)
		}
		// Only the last training bind may end at or past the cap.
		for i, n := range capParts {
			if i < len(capParts)-1 && n >= s.Config.MaxBinds {
				t.Fatalf("bind %d of %d ended at %d allocations, past the cap %d, and the pass went on", i+1, len(capParts), n, s.Config.MaxBinds)
			}
		}
		capped2 := map[string]bool{}
		for _, p := range capped.Pending {
			if p.Reason != nil && p.Reason.Constraint == "max_binds_per_pass" {
				capped2[p.OwnerID] = true
			}
		}
		if len(capTrain) < len(allTrain) && len(capped2) == 0 {
			t.Fatalf("the capped pass left %d binds to the next pass and named no job waiting for the cap", len(allTrain)-len(capTrain))
		}
		for _, b := range allTrain[len(capTrain):] {
			if !capped2[b.OwnerID] {
				t.Fatalf("%s, bound without the cap, is not waiting for it under the cap", b.OwnerID)
			}
		}
	})
}
