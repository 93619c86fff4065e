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
// removed after Config.UsageRetention.

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
	gpus := float64(j.Shape.GPUs)
	if j.Shape.GPUMilli > 0 {
		gpus = float64(j.Shape.GPUMilli) / 1000
	}
	r := model.UsageRecord{ID: j.ID, Kind: model.OwnerTraining, Owner: j.ID, Name: j.Name, Org: j.Org, Team: j.Team, User: j.User,
		GPUs: gpus, Start: j.SubmittedAt, End: ch.now, GPUSeconds: j.GPUSeconds, WaitSeconds: j.WaitSeconds,
		Preemptions: j.PreemptCount, State: j.State}
	ch.txn.Put(store.Usage, r.UsageID(), r)
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
