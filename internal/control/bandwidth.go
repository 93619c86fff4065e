package control

import (
	"slices"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// docCheckpoints holds the recent checkpoint reports the storage bandwidth
// is measured from (R3).
const docCheckpoints = "checkpoints"

// checkpointRecord is one report, with the allocation it came from so that
// the same report, repeated by every heartbeat, is counted once.
type checkpointRecord struct {
	Alloc string `json:"alloc"`
	sched.CheckpointSample
}

func (c *Controller) checkpointRecords() []checkpointRecord {
	var out []checkpointRecord
	c.st.Cache().Read(func(v store.View) { readDoc(v, docCheckpoints, &out) })
	return out
}

func samplesOf(recs []checkpointRecord) []sched.CheckpointSample {
	out := make([]sched.CheckpointSample, len(recs))
	for i, r := range recs {
		out[i] = r.CheckpointSample
	}
	return out
}

// MeasuredBandwidth is the checkpoint storage bandwidth the reports show,
// in bytes/s; 0 while none has been reported (the configured bandwidth is
// then assumed).
func (c *Controller) MeasuredBandwidth() float64 {
	return sched.MeasuredBandwidth(samplesOf(c.checkpointRecords()))
}

// noteCheckpoints records what a node report says of checkpoints: each
// workload's report of the checkpoint it last wrote (bytes, seconds), and
// each preemption killed at its deadline, which wrote its checkpoint's
// bytes in no less than the time it had. A job that left its checkpoint
// size out gets the measured one. It must run before the exits in the
// report remove their allocations.
func (c *Controller) noteCheckpoints(ch *change, rep *model.NodeReport) {
	recs := c.checkpointRecords()
	n0 := len(recs)
	seen := func(alloc string, end time.Time) bool {
		for _, r := range recs {
			if r.Alloc == alloc && r.End.Equal(end) {
				return true
			}
		}
		return false
	}
	for _, r := range rep.Allocations {
		// A report dated ahead of the control loop's clock (beyond a
		// minute of skew) is no sample: its End would make every other
		// team's reports look an hour old (MeasuredBandwidth's window).
		fresh := r.CheckpointStats != nil && !seen(r.ID, r.CheckpointStats.At) && !r.CheckpointStats.At.After(ch.now.Add(maxReportSkew))
		if st := r.CheckpointStats; fresh && st.Bytes < sched.MinSampleBytes {
			// Not a bandwidth sample, so never in recs: it is fresh only
			// while the job's measured size differs, or every heartbeat
			// would load the job.
			j, ok := ch.peekJob(ownerOf(ch, r.ID))
			fresh = ok && j.Checkpoint != nil && j.Checkpoint.MeasuredBytes != st.Bytes
		}
		if !fresh && !(r.State == model.ActualExited && r.Killed) {
			continue // the common case: nothing to look up
		}
		a := ch.alloc(r.ID)
		if a == nil || a.OwnerKind == model.OwnerInference {
			continue
		}
		if st := r.CheckpointStats; fresh {
			if st.Bytes >= sched.MinSampleBytes { // smaller ones measure latency, and would push real samples out of recs
				recs = append(recs, checkpointRecord{r.ID, sched.CheckpointSample{Bytes: st.Bytes,
					Start: st.At.Add(-time.Duration(st.Seconds * float64(time.Second))), End: st.At, Complete: true, Source: sourceOf(ch, a)}})
			}
			if j := ch.job(a.OwnerID); j != nil && j.Checkpoint != nil && j.Checkpoint.MeasuredBytes != st.Bytes {
				j.Checkpoint.MeasuredBytes = st.Bytes
			}
		}
		if r.State == model.ActualExited && r.Killed && a.Stopping && a.StopReason == "preempted" && !a.StopAt.IsZero() {
			if j := ch.job(a.OwnerID); j != nil && j.Checkpoint != nil && j.Checkpoint.Bytes() >= sched.MinSampleBytes {
				recs = append(recs, checkpointRecord{r.ID, sched.CheckpointSample{Bytes: j.Checkpoint.Bytes(), Start: a.StopAt, End: ch.now, Source: sourceOf(ch, a)}})
			}
		}
	}
	if len(recs) == n0 {
		return
	}
	// An agent repeats its last report every heartbeat: one dropped
	// already (older than its source's newest MaxCheckpointSamples) comes
	// back, and is dropped again without a write.
	kept := sched.KeepSamples(slices.DeleteFunc(slices.Clone(recs), func(r checkpointRecord) bool {
		return r.End.After(ch.now.Add(maxReportSkew)) // kept before reports were bounded
	}), func(r *checkpointRecord) sched.CheckpointSample { return r.CheckpointSample })
	if slices.Equal(kept, recs[:n0]) {
		return
	}
	ch.txn.Put(store.Docs, docCheckpoints, kept)
}

// sourceOf is who a checkpoint report from a counts for: the org/team of
// its job (sched.MeasuredBandwidth measures each alone).
func sourceOf(ch *change, a *model.Allocation) string {
	j, ok := ch.peekJob(a.OwnerID)
	if !ok {
		return ""
	}
	if scopes := j.Scopes(); len(scopes) > 0 {
		return scopes[min(len(scopes), 2)-1] // org/team, or the org alone
	}
	return ""
}

// maxReportSkew is how far ahead of the control loop's clock a
// checkpoint report may be dated (the node's clock, or the workload's).
const maxReportSkew = time.Minute

// ownerOf is the owner of an allocation as the change sees it, "" if none.
func ownerOf(ch *change, alloc string) string {
	if a := ch.alloc(alloc); a != nil {
		return a.OwnerID
	}
	return ""
}
