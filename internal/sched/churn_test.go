package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

var churnNode = model.Shape{GPUs: 8, Topology: model.TopologyNode}

// churnState is five 8-GPU nodes: the running job r on the first, and
// on the other four work that is never a victim, so that one node's
// preemption is within the hourly budget (25%). Priority alone ranks (no
// SLO tiers), so every waiting job is due.
func churnState(r model.Job, pending ...model.Job) State {
	s := State{Config: Config{SLO: SLO{MaxGPUs: -1}}}
	jobs := append([]model.Job{r}, pending...)
	for i := 1; i <= 5; i++ {
		id, owner := fmt.Sprintf("n%d", i), r.ID
		if i > 1 {
			owner = "fixed-" + id
			jobs = append(jobs, model.Job{ID: owner, Shape: churnNode, State: model.JobRunning, SubmittedAt: r.SubmittedAt, StartedAt: r.SubmittedAt})
		}
		s.Nodes = append(s.Nodes, model.Node{ID: id, Pod: "p", Model: "H100", GPUs: 8, Health: model.HealthHealthy})
		s.Allocations = append(s.Allocations, model.Allocation{ID: "a" + id, NodeID: id, GPUs: model.FullMask(8), OwnerKind: model.OwnerTraining,
			OwnerID: owner, Preemptible: owner == r.ID, CreatedAt: r.StartedAt})
	}
	s.Jobs = JobsOf(jobs)
	return s
}

// churnJob is a preemptible 8-GPU job.
func churnJob(id string, prio int, state model.JobState, submitted time.Time) model.Job {
	return model.Job{ID: id, Shape: churnNode, Priority: prio, Preemptible: true, Checkpoint: &model.Checkpoint{Path: "/c", SizeBytes: 1e9},
		State: state, SubmittedAt: submitted}
}

// preemptedFor is "victim for beneficiary" of the pass's one preemption,
// or "" when it preempted none (or more than one).
func preemptedFor(d Decision) string {
	if len(d.Preemptions) != 1 {
		return ""
	}
	return d.Preemptions[0].JobID + " for " + d.Preemptions[0].For
}

// TestWaitingGivesNoPowerOverEquals: a job's waiting bonus ranks it ahead
// in the queue but never preempts work of its own priority or above; the
// same wait does preempt work of a lower priority. Two jobs of one
// priority otherwise take turns preempting each other, each once it has
// waited two hours.
func TestWaitingGivesNoPowerOverEquals(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	running := func(prio int) model.Job {
		r := churnJob("running", prio, model.JobRunning, now.Add(-20*time.Hour))
		r.StartedAt = now.Add(-5 * time.Hour)
		return r
	}
	// Waited 10 hours: 50 of waiting bonus at the default 5 an hour.
	waiter := func(id string, prio int, waited time.Duration) model.Job {
		return churnJob(id, prio, model.JobPending, now.Add(-waited))
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
			if got := preemptedFor(Plan(churnState(running(tt.running), tt.pending...), now)); got != tt.want {
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
	for _, tt := range []struct {
		name      string
		preempted int
		ran       time.Duration
		want      string
	}{
		{"never preempted, ran 2h", 0, 2 * time.Hour, "victim for gang"},
		{"preempted once, ran 2h since", 1, 2 * time.Hour, ""},
		{"preempted once, ran 7h59m since", 1, 8*time.Hour - time.Minute, ""},
		{"preempted once, ran 8h since", 1, 8 * time.Hour, "victim for gang"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			victim := churnJob("victim", 40, model.JobRunning, now.Add(-20*time.Hour))
			victim.PreemptCount, victim.StartedAt = tt.preempted, now.Add(-tt.ran)
			gang := churnJob("gang", 60, model.JobPending, now.Add(-time.Hour))
			if got := preemptedFor(Plan(churnState(victim, gang), now)); got != tt.want {
				t.Errorf("preempted %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStarvationIsNotAQueueBehindEquals: R2's alert asks whether the
// cluster could host the job with the work ranked below it gone. A job
// waiting behind running work of its own priority or above may not
// preempt it, but waits for it to end: a queue, not the alarm. Behind
// work that may never yield, it is the alarm.
func TestStarvationIsNotAQueueBehindEquals(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name        string
		preemptible bool
		alert       bool
	}{{"higher priority, preemptible", true, false}, {"higher priority, never preemptible", false, true}} {
		r := churnJob("running", 60, model.JobRunning, now.Add(-20*time.Hour))
		r.StartedAt, r.Preemptible = now.Add(-5*time.Hour), tt.preemptible
		s := churnState(r, churnJob("w", 50, model.JobPending, now.Add(-10*time.Hour)))
		s.Allocations[0].Preemptible = tt.preemptible
		d := Plan(s, now)
		alerted := false
		for _, a := range d.Alerts {
			alerted = alerted || a.Kind == "starvation" && a.Subject == "w"
		}
		if alerted != tt.alert || len(d.Preemptions) != 0 {
			t.Errorf("%s: starvation alert %v, want %v; preemptions %+v", tt.name, alerted, tt.alert, d.Preemptions)
		}
	}
}

// TestServingTakesARepeatVictimAtOnce: RepeatMinRuntime guards a job
// against other training only; serving still takes its GPUs.
func TestServingTakesARepeatVictimAtOnce(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	victim := churnJob("victim", 40, model.JobRunning, now.Add(-20*time.Hour))
	victim.PreemptCount, victim.StartedAt = 1, now.Add(-2*time.Hour)
	s := churnState(victim)
	s.Deployments = []model.Deployment{{ID: "chat", ReplicaShape: churnNode, MinReplicas: 1, MaxReplicas: 1, Desired: 1, Priority: 100}}
	if got := preemptedFor(Plan(s, now)); got != "victim for chat#0" {
		t.Errorf("preempted %q, want victim for chat#0", got)
	}
}
