package sim

import (
	"time"

	"github.com/berthsched/berth/internal/sched"
)

// storage is the cluster's checkpoint storage: one bandwidth shared equally
// by every checkpoint being written at once (processor sharing), lowered
// during degradation episodes. Writes progress only when the engine
// advances it, at events: between events every rate is constant.
type storage struct {
	base     float64
	episodes []Degradation
	writes   []*ckptWrite
	last     time.Duration
	gen      int // bumped whenever the next completion may have moved
	// samples are the preemption checkpoints reported so far, newest
	// last: what the control loop measures its bandwidth from.
	samples []sched.CheckpointSample
}

type ckptWrite struct {
	job int // arrival number
	// source is the team whose job writes it (CheckpointSample.Source);
	// "" for the durable reports, which stand for every running job.
	source string
	bytes  float64
	done   float64
	start  time.Duration
}

// bandwidth is what the storage delivers at t, in bytes/s.
func (s *storage) bandwidth(t time.Duration) float64 {
	for _, e := range s.episodes {
		if t < e.At {
			break
		}
		if t < e.Until {
			return s.base * e.Factor
		}
	}
	return s.base
}

// edge is the first episode boundary after t, or -1.
func (s *storage) edge(t time.Duration) time.Duration {
	for _, e := range s.episodes {
		if e.At > t {
			return e.At
		}
		if e.Until > t {
			return e.Until
		}
	}
	return -1
}

// advance moves every write forward to t.
func (s *storage) advance(t time.Duration) {
	for s.last < t {
		end := t
		if b := s.edge(s.last); b >= 0 && b < end {
			end = b
		}
		if n := len(s.writes); n > 0 {
			per := s.bandwidth(s.last) / float64(n) * (end - s.last).Seconds()
			for _, w := range s.writes {
				w.done += per
			}
		}
		s.last = end
	}
}

// next is when the storage must be looked at again: the first write's
// completion at today's rates, or the next episode edge if sooner; -1 when
// nothing is being written.
func (s *storage) next() time.Duration {
	if len(s.writes) == 0 {
		return -1
	}
	left := s.writes[0].bytes - s.writes[0].done
	for _, w := range s.writes[1:] {
		left = min(left, w.bytes-w.done)
	}
	rate := s.bandwidth(s.last) / float64(len(s.writes))
	at := s.last + time.Duration(max(left, 0)/rate*float64(time.Second)) + 1
	if b := s.edge(s.last); b >= 0 && b < at {
		at = b
	}
	return at
}

// start begins a checkpoint of bytes for job (of team source) at t.
func (s *storage) start(job int, source string, bytes float64, t time.Duration) {
	s.advance(t)
	s.writes = append(s.writes, &ckptWrite{job: job, source: source, bytes: max(bytes, 1), start: t})
}

// finished removes and returns the writes complete by now (advanced).
func (s *storage) finished() []*ckptWrite {
	var done []*ckptWrite
	keep := s.writes[:0]
	for _, w := range s.writes {
		if w.done >= w.bytes*(1-1e-9) {
			done = append(done, w)
		} else {
			keep = append(keep, w)
		}
	}
	s.writes = keep
	return done
}

// cancel stops job's write at t (the job was killed) and returns it.
func (s *storage) cancel(job int, t time.Duration) *ckptWrite {
	s.advance(t)
	for i, w := range s.writes {
		if w.job == job {
			s.writes = append(s.writes[:i], s.writes[i+1:]...)
			return w
		}
	}
	return nil
}

// report records a preemption checkpoint the way an agent reports one:
// its bytes and seconds, and whether it completed before the deadline.
func (s *storage) report(w *ckptWrite, end time.Duration, complete bool) {
	s.samples = append(s.samples, sched.CheckpointSample{Bytes: int64(w.bytes), Start: Epoch.Add(w.start), End: Epoch.Add(end), Complete: complete, Source: w.source})
	s.samples = sched.KeepSamples(s.samples, func(c *sched.CheckpointSample) sched.CheckpointSample { return *c })
}

// measured is the bandwidth the control loop would pass in State, from
// the reports so far (zero until the first).
func (s *storage) measured() float64 { return sched.MeasuredBandwidth(s.samples) }

// durableBytes is the size of the durable checkpoint the simulator reports
// for the running jobs each interval: one of the design's 140 GB fine-tune
// states stands for them all.
const durableBytes = 140e9

// durableCheckpoint reports the running jobs' periodic checkpoints (R3),
// as agents report every checkpoint a workload writes, not only the ones
// a preemption asks for. Without them a measurement that fell below the
// floor could never recover: preemption stops, so no preemption
// checkpoint is written to show that storage is back. One report per
// interval, written at the storage's bandwidth shared with the
// preemption checkpoints in flight.
func (r *run) durableCheckpoint() {
	if r.trainUsed < 1 {
		return
	}
	r.store.advance(r.now)
	rate := r.store.bandwidth(r.now) / float64(1+len(r.store.writes))
	took := time.Duration(durableBytes / rate * float64(time.Second))
	r.store.report(&ckptWrite{bytes: durableBytes, start: r.now - took}, r.now, true)
}
