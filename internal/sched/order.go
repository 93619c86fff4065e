package sched

import (
	"cmp"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Priority is a job's effective priority with its parts shown, so that a
// person can see why a job ranks where it does.
type Priority struct {
	Base int `json:"base"`
	// Preemptions is the bonus for times preempted (preempt_count ×
	// per_preemption).
	Preemptions int `json:"preemptions"`
	// Waiting is the bonus for whole hours waited since the job last
	// entered the queue.
	Waiting   int `json:"waiting"`
	Effective int `json:"effective"`
}

// priorityOf computes a job's effective priority at now.
func priorityOf(j *model.Job, now time.Time, a Aging, pending bool) Priority {
	p := Priority{Base: j.Priority, Preemptions: j.PreemptCount * a.PerPreemption}
	if pending && j.Shape.GPUs >= a.MinGPUs {
		if waited := now.Sub(j.Queued()); waited > 0 {
			p.Waiting = int(waited/time.Hour) * a.PerHour
		}
	}
	p.Effective = p.Base + p.Preemptions + p.Waiting
	return p
}

// rank is the total order on training work (R2): effective priority, then
// submit time, then job id. Reservations follow it, and a job may take GPUs
// only from work ranked below it, so the wait-for graph has no cycle.
type rank struct {
	// tier comes first, lower first: §1's SLO classes (sloTier).
	tier      int8
	prio      int
	submitted int64 // unix nanoseconds: cheaper to compare than time.Time
	id        string
}

func rankOf(prio int, j *model.Job) rank { return rank{0, prio, j.SubmittedAt.UnixNano(), j.ID} }

// SLO tiers, in rank order. §1 states the training SLO as queue time p90
// under 30 minutes for jobs under 64 GPUs, while "large jobs are
// scheduled, not queued": a large job waits its turn behind the SLO
// class until it has waited ScheduleAfter; from then on its start is
// scheduled, and it ranks ahead of everything pending, reserving what it
// needs. Running large jobs rank with the scheduled: work of the SLO class
// never preempts a gang that holds a pod's worth of GPUs.
const (
	tierScheduled int8 = iota // large jobs due, and running large jobs
	tierSLO                   // jobs under SLO.MaxGPUs
	tierLarge                 // large jobs not yet due
)

// sloTier places a job in its SLO tier: pending says whether it waits.
func sloTier(j *model.Job, now time.Time, slo SLO, pending bool) int8 {
	switch {
	case slo.MaxGPUs <= 0 || j.Shape.GPUs < slo.MaxGPUs:
		if slo.MaxGPUs <= 0 {
			return tierScheduled
		}
		return tierSLO
	case !pending || j.PreemptCount > 0 || now.Sub(j.Queued()) >= slo.ScheduleAfter:
		// Running, or it ran and was preempted (its start was due
		// already), or its wait is up.
		return tierScheduled
	}
	return tierLarge
}

// above reports whether r ranks strictly above o.
func (r rank) above(o rank) bool { return r.compare(o) < 0 }

// compare is -1 when r ranks above o, 1 when below, 0 for the same job:
// one comparison per pair when a million pending jobs are sorted.
func (r rank) compare(o rank) int {
	switch {
	case r.tier != o.tier:
		return cmp.Compare(r.tier, o.tier)
	case r.prio != o.prio:
		return cmp.Compare(o.prio, r.prio) // higher first
	case r.submitted != o.submitted:
		return cmp.Compare(r.submitted, o.submitted)
	}
	return strings.Compare(r.id, o.id)
}
