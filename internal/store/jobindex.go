package store

import (
	"time"

	"github.com/tidwall/btree"

	"github.com/berthsched/berth/internal/model"
)

// jobKey is one job's place in the cache's ordered job indexes: what
// the orders compare first, kept in the key so a tree walk does not
// chase a pointer per comparison, and the cached job, which filters
// read (the cache never modifies a job: an update is a new one, and a
// new key). The trees hold pointers: one key shared by three trees, 8
// bytes a slot. 32 bytes a job: the id, compared only between jobs
// submitted in the same nanosecond, is read from the job (a copy in
// the key made it 48, 16 MB more at 1M jobs; copying the filtered
// fields too made it 112).
type jobKey struct {
	prio int
	at   int64 // submitted, unix nanoseconds
	fin  int64 // finished, unix nanoseconds; for finished jobs
	job  *model.Job
}

func keyOf(j *model.Job) *jobKey {
	return &jobKey{prio: j.Priority, at: j.SubmittedAt.UnixNano(), fin: j.FinishedAt.UnixNano(), job: j}
}

// pivot is a key to search from: a job that has only an id.
func pivot(prio int, at int64, id string) *jobKey {
	return &jobKey{prio: prio, at: at, job: &model.Job{ID: id}}
}

// bySubmit orders all jobs as lists show them: submit time, then id.
func bySubmit(a, b *jobKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.job.ID < b.job.ID
}

// byQueue orders pending jobs by base priority, then submit time and id:
// the queue position a job is told before a pass has ranked it.
func byQueue(a, b *jobKey) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return bySubmit(a, b)
}

// byFinish orders finished jobs by when they finished: the oldest are
// the first compacted.
func byFinish(a, b *jobKey) bool {
	if a.fin != b.fin {
		return a.fin < b.fin
	}
	return a.job.ID < b.job.ID
}

// jobIndex keeps the jobs ordered three ways, so that a submit's queue
// position and a page of a list cost a tree walk, not a sort of the table.
// tidwall/btree is used because its B-tree counts items per node: GetAt
// is O(log n), which a rank needs and google/btree does not offer. The
// cache's own lock guards it, so the trees take none.
type jobIndex struct {
	all      *btree.BTreeG[*jobKey]
	pending  *btree.BTreeG[*jobKey]
	finished *btree.BTreeG[*jobKey]
}

func newJobIndex() *jobIndex {
	opt := btree.Options{NoLocks: true}
	return &jobIndex{all: btree.NewBTreeGOptions(bySubmit, opt), pending: btree.NewBTreeGOptions(byQueue, opt),
		finished: btree.NewBTreeGOptions(byFinish, opt)}
}

func (x *jobIndex) add(j *model.Job) {
	k := keyOf(j)
	x.all.Set(k)
	if j.State == model.JobPending {
		x.pending.Set(k)
	}
	if j.State.Terminal() {
		x.finished.Set(k)
	}
}

func (x *jobIndex) drop(j *model.Job) {
	k := keyOf(j)
	x.all.Delete(k)
	x.pending.Delete(k)
	x.finished.Delete(k)
}

// FinishedBefore lists up to n finished jobs that finished before cut,
// oldest first.
func (v View) FinishedBefore(cut time.Time, n int) []string {
	var out []string
	c := cut.UnixNano()
	v.c.jobs.finished.Scan(func(k *jobKey) bool {
		if k.fin >= c || len(out) >= n {
			return false
		}
		out = append(out, k.job.ID)
		return true
	})
	return out
}

// rank counts the items of t ordered before k: a binary search over
// positions, each a GetAt, so O(log² n).
func rank(t *btree.BTreeG[*jobKey], less func(a, b *jobKey) bool, k *jobKey) int {
	lo, hi := 0, t.Len()
	for lo < hi {
		mid := (lo + hi) / 2
		if it, _ := t.GetAt(mid); less(it, k) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// PendingAhead counts the pending jobs ahead of a job of this priority
// and submit time in base-priority order (itself not counted).
func (v View) PendingAhead(priority int, submitted time.Time, id string) int {
	return rank(v.c.jobs.pending, byQueue, pivot(priority, submitted.UnixNano(), id))
}

// JobFilter selects jobs for JobsAfter; empty fields match everything.
type JobFilter struct {
	Org, Team, Name string
	States          []model.JobState
	// Kind is JobKindShare (jobs asking for a share of one GPU),
	// JobKindWhole (whole GPUs), or empty for both.
	Kind string
}

// The kinds of job a list can filter on: what the job asks for.
const (
	JobKindShare = "share"
	JobKindWhole = "whole"
)

func (f *JobFilter) match(k *jobKey) bool {
	j := k.job
	if f.Org != "" && j.Org != f.Org || f.Team != "" && j.Team != f.Team || f.Name != "" && j.Name != f.Name {
		return false
	}
	if f.Kind != "" && j.Shape.Fraction() != (f.Kind == JobKindShare) {
		return false
	}
	if len(f.States) == 0 {
		return true
	}
	for _, s := range f.States {
		if j.State == s {
			return true
		}
	}
	return false
}

// JobCursor is a place in the submit order: a page continues after it.
type JobCursor struct {
	At time.Time
	ID string
}

// JobsAfter calls fn with the jobs that match f, in submit order, from
// just after the cursor (nil: the first), until fn returns false.
func (v View) JobsAfter(after *JobCursor, f JobFilter, fn func(model.Job) bool) {
	visit := func(k *jobKey) bool {
		if !f.match(k) {
			return true
		}
		return fn(*k.job)
	}
	if after == nil {
		v.c.jobs.all.Scan(visit)
		return
	}
	from := pivot(0, after.At.UnixNano(), after.ID)
	v.c.jobs.all.Ascend(from, func(k *jobKey) bool {
		if k.at == from.at && k.job.ID == after.ID {
			return true // the cursor itself was on the last page
		}
		return visit(k)
	})
}
