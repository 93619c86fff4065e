package sched

import (
	"cmp"
	"slices"
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
	// Source is who reported it: the org/team of the job whose workload
	// wrote it ("" for none). One source cannot move the measure alone.
	Source string `json:"source,omitempty"`
}

// MaxCheckpointSamples is how many recent samples of each source the
// measurement reads, and MaxCheckpointSources how many sources (those
// that reported last); KeepSamples keeps no more.
const (
	MaxCheckpointSamples = 8
	MaxCheckpointSources = 64
)

// ReportWindow: a source's samples count while its newest is no older
// than this before the newest of all.
const ReportWindow = time.Hour

// KeepSamples returns what a measurement keeps of xs (each one's sample
// given by sample), in their order: the newest MaxCheckpointSamples of
// each source by End, of the MaxCheckpointSources sources whose newest
// sample is newest. A source that reports every heartbeat cannot push the
// others' samples out, and a report that comes back after it was dropped
// (an agent repeats its last one every heartbeat) is dropped again: it is
// older than what was kept.
func KeepSamples[T any](xs []T, sample func(*T) CheckpointSample) []T {
	type entry struct {
		i   int
		end time.Time
	}
	bySource := map[string][]entry{}
	for i := range xs {
		s := sample(&xs[i])
		bySource[s.Source] = append(bySource[s.Source], entry{i, s.End})
	}
	newer := func(a, b entry) int { // newest first; later in xs first among equals
		if c := b.end.Compare(a.end); c != 0 {
			return c
		}
		return cmp.Compare(b.i, a.i)
	}
	heads := make([]entry, 0, len(bySource))
	for src, es := range bySource {
		slices.SortFunc(es, newer)
		bySource[src] = es[:min(len(es), MaxCheckpointSamples)]
		heads = append(heads, es[0])
	}
	slices.SortFunc(heads, newer)
	keep := make([]bool, len(xs))
	for _, h := range heads[:min(len(heads), MaxCheckpointSources)] {
		for _, e := range bySource[sample(&xs[h.i]).Source] {
			keep[e.i] = true
		}
	}
	out := xs[:0:0]
	for i := range xs {
		if keep[i] {
			out = append(out, xs[i])
		}
	}
	return out
}

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
//
// A workload reports its own checkpoints, and a team's workload could lie:
// report slow writes, or ignore SIGTERM until it is killed, to stop
// preemption in the whole fleet (its own jobs with it). So each source
// (the org/team whose job wrote the sample) is measured alone, over the
// newest MaxCheckpointSamples of its samples, and the storage is as fast
// as the upper median of the sources that reported within ReportWindow
// of the newest sample (the faster of two, the middle of three): one
// team's reports, slow or fast, cannot move it while three or more
// report, and R3's guard stops preemption when most teams that wrote
// recently saw the storage slow. A degradation is then seen once enough
// of the teams whose last checkpoint came before it write again or fall
// out of the window (an hour at most). Reports faster than the storage
// are capped as well: the pass never plans with more than the
// configured bandwidth (planBandwidth).
func MeasuredBandwidth(samples []CheckpointSample) float64 {
	samples = KeepSamples(samples, func(s *CheckpointSample) CheckpointSample { return *s })
	var newest time.Time
	groups := map[string][]CheckpointSample{}
	for _, s := range samples {
		if s.Bytes >= MinSampleBytes {
			groups[s.Source] = append(groups[s.Source], s)
			newest = later(newest, s.End)
		}
	}
	var votes []float64
	for _, g := range groups {
		last := time.Time{}
		for _, s := range g {
			last = later(last, s.End)
		}
		if newest.Sub(last) <= ReportWindow {
			votes = append(votes, sourceBandwidth(g))
		}
	}
	if len(votes) == 0 {
		return 0
	}
	// The upper median: with three or more sources one liar, fast or
	// slow, cannot move it past the others; with two, the faster counts.
	slices.SortFunc(votes, func(a, b float64) int { return cmp.Compare(b, a) })
	return votes[(len(votes)-1)/2]
}

// sourceBandwidth measures one source's samples, as described above.
func sourceBandwidth(samples []CheckpointSample) float64 {
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
