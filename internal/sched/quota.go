package sched

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berthsched/berth/internal/model"
)

// quotaBook tracks GPU use per quota scope (org, org/team, org/team/user)
// during a pass. Use within a scope's guaranteed_gpus is guaranteed; use
// beyond it, up to max_gpus, is borrowed and always preemptible (§4).
type quotaBook struct {
	quotas     map[string]model.Quota
	used       map[string]int // all use, borrowed or not
	guaranteed map[string]int // use that is not borrowed
}

func newQuotaBook(quotas []model.Quota) *quotaBook {
	q := &quotaBook{quotas: map[string]model.Quota{}, used: map[string]int{}, guaranteed: map[string]int{}}
	for _, x := range quotas {
		q.quotas[x.Scope] = x
	}
	return q
}

// add records gpus of use by a job.
func (q *quotaBook) add(j *model.Job, gpus int, borrowed bool) {
	if len(q.quotas) == 0 {
		return // nothing to account against (and Scopes allocates)
	}
	for _, s := range j.Scopes() {
		q.used[s] += gpus
		if !borrowed {
			q.guaranteed[s] += gpus
		}
	}
}

// governed reports whether any scope of the job has a guarantee: such a
// job's non-borrowed work is guaranteed and never preempted.
func (q *quotaBook) governed(j *model.Job) bool {
	if len(q.quotas) == 0 {
		return false
	}
	for _, s := range j.Scopes() {
		if x, ok := q.quotas[s]; ok && x.GuaranteedGPUs > 0 {
			return true
		}
	}
	return false
}

// admit decides whether gpus more for job j fit its quotas now, and
// whether they would be borrowed. A nil reason means it fits.
func (q *quotaBook) admit(j *model.Job, gpus int) (borrowed bool, why *Reason) {
	if len(q.quotas) == 0 {
		return false, nil
	}
	for _, s := range j.Scopes() {
		x, ok := q.quotas[s]
		if !ok {
			continue
		}
		if x.MaxGPUs > 0 && q.used[s]+gpus > x.MaxGPUs {
			return false, &Reason{Code: ReasonUnschedulable, Constraint: "quota", BestGPUs: x.MaxGPUs - q.used[s], BestAt: s,
				Message: fmt.Sprintf("quota %s: max_gpus is %d and %d are in use; the job needs %d", s, x.MaxGPUs, q.used[s], gpus)}
		}
	}
	borrowed = q.borrows(j, gpus)
	if borrowed && !j.Preemptible {
		s := j.Scopes()
		return true, &Reason{Code: ReasonUnschedulable, Constraint: "quota", BestAt: s[len(s)-1],
			Message: fmt.Sprintf("needs %d GPUs beyond its guaranteed quota, and only preemptible jobs may borrow", gpus)}
	}
	return borrowed, nil
}

// borrows reports whether gpus more for job j would take any of its
// scopes past guaranteed_gpus.
func (q *quotaBook) borrows(j *model.Job, gpus int) bool {
	for _, s := range j.Scopes() {
		if x, ok := q.quotas[s]; ok && q.guaranteed[s]+gpus > x.GuaranteedGPUs {
			return true
		}
	}
	return false
}

// MarkBorrowed marks which running training in s is borrowed, for a
// table that does not record it (Kubernetes, where the pods are the
// record and their annotations are their authors' to edit): in the order
// the jobs started, each is admitted as at placement, and one whose GPUs
// take any of its scopes past guaranteed_gpus is borrowed.
func MarkBorrowed(s *State) {
	if len(s.Quotas) == 0 {
		return
	}
	gpus := map[string]int{}
	for _, a := range s.Allocations {
		if a.OwnerKind == model.OwnerTraining {
			gpus[a.OwnerID] += a.GPUs.Count()
		}
	}
	var running []*model.Job
	for _, j := range s.Jobs {
		if gpus[j.ID] > 0 {
			running = append(running, j)
		}
	}
	slices.SortFunc(running, func(a, b *model.Job) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	q := newQuotaBook(s.Quotas)
	borrowed := map[string]bool{}
	for _, j := range running {
		borrowed[j.ID] = q.borrows(j, gpus[j.ID])
		q.add(j, gpus[j.ID], borrowed[j.ID])
	}
	for i := range s.Allocations {
		if a := &s.Allocations[i]; a.OwnerKind == model.OwnerTraining && borrowed[a.OwnerID] {
			a.Borrowed = true
		}
	}
}

// QuotaError refuses a job its quota tree can never admit, naming the
// scope that refused it.
type QuotaError struct {
	Scope   string `json:"scope"`
	Message string `json:"message"`
}

func (e *QuotaError) Error() string { return e.Message }

// neverFits says whether a job can never fit its quotas, whatever else runs.
func (q *quotaBook) neverFits(j *model.Job) error {
	for _, s := range j.Scopes() {
		if x, ok := q.quotas[s]; ok && x.MaxGPUs > 0 && j.Shape.GPUs > x.MaxGPUs {
			return &QuotaError{Scope: s, Message: fmt.Sprintf("gpus: %d exceeds quota %s's max_gpus of %d", j.Shape.GPUs, s, x.MaxGPUs)}
		}
		if x, ok := q.quotas[s]; ok && !j.Preemptible && j.Shape.GPUs > x.GuaranteedGPUs {
			return &QuotaError{Scope: s, Message: fmt.Sprintf("gpus: %d exceeds quota %s's guaranteed_gpus of %d, and a job that is not preemptible cannot borrow", j.Shape.GPUs, s, x.GuaranteedGPUs)}
		}
	}
	return nil
}
