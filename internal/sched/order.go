package sched

import (
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
	prio      int
	submitted int64 // unix nanoseconds: cheaper to compare than time.Time
	id        string
}

func rankOf(prio int, j *model.Job) rank { return rank{prio, j.SubmittedAt.UnixNano(), j.ID} }

// above reports whether r ranks strictly above o.
func (r rank) above(o rank) bool {
	if r.prio != o.prio {
		return r.prio > o.prio
	}
	if r.submitted != o.submitted {
		return r.submitted < o.submitted
	}
	return r.id < o.id
}
