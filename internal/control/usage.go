package control

import (
	"sort"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// Accounting: a finished job, and each inference replica's allocation
// when it goes, leaves a model.UsageRecord in the table, written in the
// same transaction that ends it, so no finish is counted twice or lost to
// a leader change. The records outlive the jobs' own entries and are
// removed after Config.UsageRetention. A finished job's own entry goes
// sooner, after Config.JobRetention: what is left of it is its usage
// record, which job show reads from then on.

// usageSweepEvery is how often the leader looks for expired records, and
// usageSweepMax how many it removes in one transaction.
const (
	usageSweepEvery = time.Minute
	usageSweepMax   = 500
)

// heldFor adds an allocation's GPU time to its job as it goes.
func heldFor(a *model.Allocation, now time.Time) float64 {
	return model.AllocGPUs(a) * max(0, now.Sub(a.CreatedAt).Seconds())
}

// recordJob writes a finished job's usage record.
func (ch *change) recordJob(j *model.Job) {
	r := jobUsage(j, ch.now)
	ch.txn.Put(store.Usage, r.UsageID(), r)
}

// jobUsage is a job's usage record, ending at end.
func jobUsage(j *model.Job, end time.Time) model.UsageRecord {
	gpus := float64(j.Shape.GPUs)
	if j.Shape.GPUMilli > 0 {
		gpus = float64(j.Shape.GPUMilli) / 1000
	}
	return model.UsageRecord{ID: j.ID, Kind: model.OwnerTraining, Owner: j.ID, Name: j.Name, Org: j.Org, Team: j.Team, User: j.User,
		GPUs: gpus, Start: j.SubmittedAt, End: end, GPUSeconds: j.Run().GPUSeconds, WaitSeconds: j.Run().WaitSeconds,
		Preemptions: j.PreemptCount, State: j.State}
}

// recordReplica writes a gone inference allocation's usage record.
func (ch *change) recordReplica(a *model.Allocation) {
	r := model.UsageRecord{ID: a.ID, Kind: model.OwnerInference, Owner: a.OwnerID, Name: a.OwnerID,
		GPUs: model.AllocGPUs(a), Start: a.CreatedAt, End: ch.now, GPUSeconds: heldFor(a, ch.now)}
	ch.c.st.Cache().Read(func(v store.View) {
		if e, ok := v.Get(store.Deployments, a.OwnerID); ok {
			r.Org, r.Team = model.TeamOf(e.Obj.(model.Deployment).Team)
		}
	})
	ch.txn.Put(store.Usage, r.UsageID(), r)
}

// sweepUsage removes records past the retention, at most usageSweepMax
// a pass, oldest first.
func (c *Controller) sweepUsage(ch *change) {
	// A short job retention (tests, small dev fleets) is swept as often.
	if ch.now.Sub(c.jobsSwept) >= min(usageSweepEvery, c.cfg.JobRetention/2) {
		c.jobsSwept = ch.now
		c.compactJobs(ch)
	}
	if ch.now.Sub(c.usageSwept) < usageSweepEvery {
		return
	}
	c.usageSwept = ch.now
	cut := ch.now.Add(-c.cfg.UsageRetention)
	c.sweepBefore(ch, store.Usage, func(e store.Entry) bool {
		r, ok := e.Obj.(model.UsageRecord)
		return ok && r.End.Before(cut)
	})
}

// compactJobs deletes finished jobs past the retention, oldest first, at
// most usageSweepMax a pass; the cache's finish-ordered index finds them
// without a scan of the table. A job compacts to its usage record,
// written now if it has none (one finished before records were kept); a
// cancelled job whose processes are still stopping waits for them.
func (c *Controller) compactJobs(ch *change) {
	cut := ch.now.Add(-c.cfg.JobRetention)
	c.st.Cache().Read(func(v store.View) {
		n := 0
		for _, id := range v.FinishedBefore(cut, 2*usageSweepMax) {
			if n == usageSweepMax || len(v.AllocationsOf(id)) > 0 {
				continue
			}
			if _, ok := v.UsageOf(id); !ok {
				e, ok := v.Get(store.Jobs, id)
				if !ok {
					continue
				}
				j := e.Obj.(*model.Job)
				r := jobUsage(j, j.FinishedAt)
				ch.txn.Put(store.Usage, r.UsageID(), r)
			}
			ch.txn.Delete(store.Jobs, id)
			n++
		}
	})
}

// sweepBefore deletes, in this pass's write, the entries of kind that old
// says have aged out: the oldest ids first (both kinds' ids sort by
// time), at most usageSweepMax a pass so that one write stays small.
func (c *Controller) sweepBefore(ch *change, kind store.Kind, old func(store.Entry) bool) {
	var ids []string
	c.st.Cache().Read(func(v store.View) {
		v.Each(kind, func(id string, e store.Entry) {
			if old(e) {
				ids = append(ids, id)
			}
		})
	})
	sort.Strings(ids)
	for _, id := range ids[:min(len(ids), usageSweepMax)] {
		ch.txn.Delete(kind, id)
	}
}

// UsageRecords lists the kept records that ended at or after since.
func (c *Controller) UsageRecords(since time.Time) []model.UsageRecord {
	var out []model.UsageRecord
	c.st.Cache().Read(func(v store.View) {
		v.Each(store.Usage, func(_ string, e store.Entry) {
			if r, ok := e.Obj.(model.UsageRecord); ok && !r.End.Before(since) {
				out = append(out, r)
			}
		})
	})
	return out
}
