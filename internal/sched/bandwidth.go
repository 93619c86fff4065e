package sched

import (
	"sort"
	"time"
)

// CheckpointSample is one preemption checkpoint as its node reported it
// (R3): how many bytes, from when to when, and whether it was written
// before the deadline (Complete) or the job was killed first.
type CheckpointSample struct {
	Bytes    int64     `json:"bytes"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Complete bool      `json:"complete"`
}

// MaxCheckpointSamples is how many recent samples the measurement reads;
// callers keep no more than this, newest last.
const MaxCheckpointSamples = 8

// MinSampleBytes: a checkpoint smaller than this measures the storage's
// latency (an open, a write, an fsync) rather than its bandwidth, and is
// not counted: a job whose state is a few kilobytes, checkpointing in a
// millisecond, read as 100 KB/s and stopped every preemption in the fleet.
const MinSampleBytes = 64 << 20

// MeasuredBandwidth is the checkpoint storage bandwidth the samples show,
// in bytes/s, or 0 with no sample. It is what the control loop and the
// simulator pass as State.StorageBandwidth, computed the same way:
//
//   - Complete checkpoints give the storage's throughput while it was busy:
//     their bytes over the union of their intervals. Checkpoints written at
//     once share the bandwidth, so each alone looks slow; together they
//     show what the storage delivers.
//   - A checkpoint cut short at its deadline wrote its bytes in no less
//     than its time: it caps the estimate at bytes/seconds when it is newer
//     than the newest complete one. So when storage degrades and
//     checkpoints start missing deadlines, the estimate falls with each
//     miss, deadlines lengthen, and below the floor preemption stops.
//
// Samples under MinSampleBytes are left out.
func MeasuredBandwidth(samples []CheckpointSample) float64 {
	if n := len(samples); n > MaxCheckpointSamples {
		samples = samples[n-MaxCheckpointSamples:]
	}
	big := make([]CheckpointSample, 0, len(samples))
	for _, s := range samples {
		if s.Bytes >= MinSampleBytes {
			big = append(big, s)
		}
	}
	samples = big
	var complete []CheckpointSample
	var newest time.Time
	for _, s := range samples {
		if s.Complete && s.End.After(s.Start) {
			complete = append(complete, s)
			newest = later(newest, s.End)
		}
	}
	est := 0.0
	if len(complete) > 0 {
		sort.Slice(complete, func(a, b int) bool { return complete[a].Start.Before(complete[b].Start) })
		var bytes float64
		var busy time.Duration
		var from, to time.Time
		for i, s := range complete {
			bytes += float64(s.Bytes)
			switch {
			case i == 0:
				from, to = s.Start, s.End
			case s.Start.After(to):
				busy += to.Sub(from)
				from, to = s.Start, s.End
			default:
				to = later(to, s.End)
			}
		}
		busy += to.Sub(from)
		est = bytes / busy.Seconds()
	}
	for _, s := range samples {
		if s.Complete || !s.End.After(s.Start) || s.End.Before(newest) {
			continue
		}
		if c := float64(s.Bytes) / s.End.Sub(s.Start).Seconds(); est == 0 || c < est {
			est = c
		}
	}
	return est
}
