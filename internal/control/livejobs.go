package control

import (
	"slices"
	"strings"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// liveJobs is the loop's copy of the unfinished jobs, sorted by id, and
// the cache revision it reflects. Each pass catches up on the jobs that
// changed since (the cache's journal) rather than copying the whole
// queue under the cache's lock: at 100k pending that copy held every
// submit waiting for its write to show for tens of milliseconds, and
// made tens of MB of garbage a pass. Only the loop touches it; the core
// never modifies the jobs it is given.
type liveJobs struct {
	rev  int64
	jobs []model.Job
}

// jobChange is one job as the cache holds it now; live is false when it
// is gone or finished.
type jobChange struct {
	id   string
	job  model.Job
	live bool
}

// read brings the copy up to the view's revision and returns it.
func (l *liveJobs) read(v store.View) []model.Job {
	var changed []string
	if l.jobs == nil || !v.ChangedSince(store.Jobs, l.rev, func(id string) { changed = append(changed, id) }) ||
		len(changed) > v.Len(store.Jobs)/4 {
		// First read, a journal that does not reach back, or most of the
		// table changed: copy it whole.
		jobs := make([]model.Job, 0, len(l.jobs))
		v.Each(store.Jobs, func(_ string, e store.Entry) {
			if j := e.Obj.(model.Job); !j.State.Terminal() {
				jobs = append(jobs, j)
			}
		})
		slices.SortFunc(jobs, func(a, b model.Job) int { return strings.Compare(a.ID, b.ID) })
		l.rev, l.jobs = v.Rev(), jobs
		return l.jobs
	}
	if len(changed) > 0 {
		slices.Sort(changed)
		changed = slices.Compact(changed)
		cs := make([]jobChange, len(changed))
		for i, id := range changed {
			cs[i].id = id
			if e, ok := v.Get(store.Jobs, id); ok {
				cs[i].job = e.Obj.(model.Job)
				cs[i].live = !cs[i].job.State.Terminal()
			}
		}
		l.jobs = patchJobs(l.jobs, cs)
	}
	l.rev = v.Rev()
	return l.jobs
}

// patchJobs applies changes (sorted by id) to jobs (sorted by id), in
// place where it can: replaced jobs in their slot, finished ones removed,
// new ones appended (job ids grow with time, so they sort last) or, if
// not, merged by a sort.
func patchJobs(jobs []model.Job, cs []jobChange) []model.Job {
	byID := func(j model.Job, id string) int { return strings.Compare(j.ID, id) }
	gone := map[string]bool{}
	var added []model.Job
	for _, c := range cs {
		i, found := slices.BinarySearchFunc(jobs, c.id, byID)
		switch {
		case found && c.live:
			jobs[i] = c.job
		case found:
			gone[c.id] = true
		case c.live:
			added = append(added, c.job)
		}
	}
	if len(gone) > 0 {
		jobs = slices.DeleteFunc(jobs, func(j model.Job) bool { return gone[j.ID] })
	}
	if len(added) == 0 {
		return jobs
	}
	inOrder := len(jobs) == 0 || added[0].ID > jobs[len(jobs)-1].ID
	jobs = append(jobs, added...)
	if !inOrder {
		slices.SortFunc(jobs, func(a, b model.Job) int { return strings.Compare(a.ID, b.ID) })
	}
	return jobs
}
