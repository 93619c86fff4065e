package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// TestWaitingGivesNoPowerOverEquals: a job's waiting bonus ranks it ahead
// in the queue but never preempts work of its own priority or above; the
// same wait does preempt work of a lower priority. Two jobs of one
// priority otherwise take turns preempting each other, each once it has
// waited two hours.
func TestWaitingGivesNoPowerOverEquals(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ckpt := &model.Checkpoint{Path: "/c", SizeBytes: 1e9}
	node := model.Shape{GPUs: 8, Topology: model.TopologyNode}
	// Priority alone ranks (no SLO tiers), so the waiting job is due.
	cfg := Config{SLO: SLO{MaxGPUs: -1}}
	state := func(running int, pending ...model.Job) State {
		r := model.Job{ID: "running", Shape: node, Priority: running, Preemptible: true, Checkpoint: ckpt,
			State: model.JobRunning, SubmittedAt: now.Add(-20 * time.Hour), StartedAt: now.Add(-5 * time.Hour)}
		s := State{
			Nodes:       []model.Node{{ID: "n1", Pod: "p", Model: "H100", GPUs: 8, Health: model.HealthHealthy}},
			Allocations: []model.Allocation{{ID: "a1", NodeID: "n1", GPUs: model.FullMask(8), OwnerKind: model.OwnerTraining, OwnerID: "running", Preemptible: true, CreatedAt: r.StartedAt}},
			Config:      cfg,
		}
		jobs := append([]model.Job{r}, pending...)
		// Four more nodes of work that is never a victim, so that one
		// node's preemption is within the hourly budget (25%).
		for i := 2; i <= 5; i++ {
			id := fmt.Sprintf("n%d", i)
			s.Nodes = append(s.Nodes, model.Node{ID: id, Pod: "p", Model: "H100", GPUs: 8, Health: model.HealthHealthy})
			jobs = append(jobs, model.Job{ID: "fixed-" + id, Shape: node, Priority: 0, State: model.JobRunning, SubmittedAt: r.SubmittedAt, StartedAt: r.StartedAt})
			s.Allocations = append(s.Allocations, model.Allocation{ID: "a" + id, NodeID: id, GPUs: model.FullMask(8), OwnerKind: model.OwnerTraining, OwnerID: "fixed-" + id, CreatedAt: r.StartedAt})
		}
		s.Jobs = JobsOf(jobs)
		return s
	}
	// waited 10 hours: 50 of waiting bonus at the default 5 an hour.
	waiter := func(id string, prio int, waited time.Duration) model.Job {
		return model.Job{ID: id, Shape: node, Priority: prio, Preemptible: true, Checkpoint: ckpt,
			State: model.JobPending, SubmittedAt: now.Add(-waited)}
	}
	preempted := func(d Decision) string {
		if len(d.Preemptions) != 1 {
			return ""
		}
		return d.Preemptions[0].JobID + " for " + d.Preemptions[0].For
	}
	for _, tt := range []struct {
		name    string
		running int
		pending []model.Job
		want    string
	}{
		{"same priority, waited 10h", 60, []model.Job{waiter("w", 60, 10*time.Hour)}, ""},
		{"higher priority running, waited 10h", 70, []model.Job{waiter("w", 60, 10*time.Hour)}, ""},
		{"lower priority running, waited 10h", 55, []model.Job{waiter("w", 60, 10*time.Hour)}, "running for w"},
		{"lower priority running by the margin, no wait", 50, []model.Job{waiter("w", 60, 0)}, "running for w"},
		// The first finds no room among equals; the second, ranked below
		// it by waiting but of higher priority, still may preempt.
		{"an equal's failure does not stop a higher priority", 60,
			[]model.Job{waiter("equal", 60, 10*time.Hour), waiter("higher", 70, 0)}, "running for higher"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := preempted(Plan(state(tt.running, tt.pending...), now)); got != tt.want {
				t.Errorf("preempted %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRepeatVictimsRunBeforeTrainingTakesThemAgain: a job preempted
// before yields to other training only once it has run RepeatMinRuntime
// since its restart; a job never preempted yields after MinRuntime.
func TestRepeatVictimsRunBeforeTrainingTakesThemAgain(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ckpt := &model.Checkpoint{Path: "/c", SizeBytes: 1e9}
	node := model.Shape{GPUs: 8, Topology: model.TopologyNode}
	state := func(preempted int, ran time.Duration) State {
		victim := model.Job{ID: "victim", Shape: node, Priority: 40, Preemptible: true, Checkpoint: ckpt, PreemptCount: preempted,
			State: model.JobRunning, SubmittedAt: now.Add(-20 * time.Hour), StartedAt: now.Add(-ran)}
		gang := model.Job{ID: "gang", Shape: node, Priority: 60, Preemptible: true, Checkpoint: ckpt,
			State: model.JobPending, SubmittedAt: now.Add(-time.Hour)}
		jobs := []model.Job{victim, gang}
		s := State{Config: Config{SLO: SLO{MaxGPUs: -1}}}
		for i := 1; i <= 5; i++ {
			id := fmt.Sprintf("n%d", i)
			s.Nodes = append(s.Nodes, model.Node{ID: id, Pod: "p", Model: "H100", GPUs: 8, Health: model.HealthHealthy})
			owner := "victim"
			if i > 1 {
				// Work that is never a victim, so that one node's
				// preemption is within the hourly budget.
				owner = "fixed-" + id
				jobs = append(jobs, model.Job{ID: owner, Shape: node, State: model.JobRunning, SubmittedAt: victim.SubmittedAt, StartedAt: victim.SubmittedAt})
			}
			s.Allocations = append(s.Allocations, model.Allocation{ID: "a" + id, NodeID: id, GPUs: model.FullMask(8), OwnerKind: model.OwnerTraining, OwnerID: owner,
				Preemptible: owner == "victim", CreatedAt: now.Add(-ran)})
		}
		s.Jobs = JobsOf(jobs)
		return s
	}
	for _, tt := range []struct {
		name      string
		preempted int
		ran       time.Duration
		want      bool
	}{
		{"never preempted, ran 2h", 0, 2 * time.Hour, true},
		{"preempted once, ran 2h since", 1, 2 * time.Hour, false},
		{"preempted once, ran 7h59m since", 1, 8*time.Hour - time.Minute, false},
		{"preempted once, ran 8h since", 1, 8 * time.Hour, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Plan(state(tt.preempted, tt.ran), now)
			if got := len(d.Preemptions) == 1 && d.Preemptions[0].JobID == "victim"; got != tt.want {
				t.Errorf("preempted: %v (%+v), want %v", got, d.Preemptions, tt.want)
			}
		})
	}
}
