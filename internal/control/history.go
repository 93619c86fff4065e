package control

import (
	"sort"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// The dashboard's plots over the last hours come from samples the leader
// writes into the table, one key per sample, so a new leader (or a
// follower serving the page) has the same history. Samples past
// Config.HistoryKeep are removed as new ones are written.

// sampleFleet writes a sample when HistoryEvery has passed since the
// newest one the table holds (read from the table once per leadership,
// then remembered), and removes the samples past HistoryKeep.
func (c *Controller) sampleFleet(ch *change, in *input) {
	if c.sampledAt.IsZero() {
		c.st.Cache().Read(func(v store.View) {
			v.Each(store.History, func(_ string, e store.Entry) {
				if s, ok := e.Obj.(model.Sample); ok && s.At.After(c.sampledAt) {
					c.sampledAt = s.At
				}
			})
		})
	}
	if ch.now.Sub(c.sampledAt) < c.cfg.HistoryEvery {
		return
	}
	s := c.Sample(in.state, ch.now)
	ch.txn.Put(store.History, s.At.UTC().Format("20060102T150405.000"), s)
	c.sampledAt = s.At
	cut := ch.now.Add(-c.cfg.HistoryKeep)
	c.sweepBefore(ch, store.History, func(e store.Entry) bool {
		s, ok := e.Obj.(model.Sample)
		return ok && s.At.Before(cut)
	})
}

// Sample is the fleet now, measured the way the server reports it.
func (c *Controller) Sample(st sched.State, now time.Time) model.Sample {
	cfg := c.cfg.Sched
	ix := sched.NewIndex(st.Nodes, st.Allocations, cfg)
	sum := sched.Available(ix, c.Reservations(), cfg.Lending(st.StorageBandwidth, st.RecentPreemptions, now), false)
	s := model.Sample{At: now, LargestNode: sum.LargestPlaceable.Node, LargestPod: sum.LargestPlaceable.Pod, LargestAny: sum.LargestPlaceable.Any}
	s.TotalGPUs, s.AllocatedGPUs = model.SchedulableGPUs(st.Nodes), model.AllocatedGPUs(st.Allocations)
	for _, j := range st.Jobs {
		switch j.State {
		case model.JobPending:
			s.Queued[model.SizeClass(j.Shape.GPUs)]++
		case model.JobRunning:
			s.RunningTraining++
		}
	}
	s.Preemptions, s.PreemptedGPUs = c.RecentPreemptions(now)
	return s
}

// History lists the samples at or after since, oldest first.
func (c *Controller) History(since time.Time) []model.Sample {
	out := []model.Sample{}
	c.st.Cache().Read(func(v store.View) {
		v.Each(store.History, func(_ string, e store.Entry) {
			if s, ok := e.Obj.(model.Sample); ok && !s.At.Before(since) {
				out = append(out, s)
			}
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}
