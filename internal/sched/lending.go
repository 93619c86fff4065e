package sched

import (
	"fmt"
	"time"
)

// When the inference pool is lent. R1 lends its idle GPUs to preemptible
// training because the pool can take them back at once. Two states of
// the fleet make a loan one the pool cannot take back well, and while
// either holds it is not lent:
//
//   - Checkpoint storage measured below storage.min_bandwidth (R3):
//     preemption is stopped, and a borrower taken back now may miss its
//     checkpoint's deadline and lose the work since its last durable
//     one. Lent anyway, a degradation at the morning's ramp left
//     borrowers on GPUs serving needed for 4.5 hours (the simulator's
//     `seed-heavy-elastic`, seed 1: 199 GPU-hours of demand shed). A
//     loan made before storage degraded is still taken back (allow).
//   - Inference took back GPUs it had lent within ReclaimQuiet: serving
//     is growing, and what is lent now comes back within minutes, a
//     checkpoint and a restart for minutes of work, and often the same
//     job preempted twice: on `seed`, seeds 1-3, 10 of the 35 repeat
//     preemptions were a job reclaimed in the morning, lent the pool
//     again and reclaimed again within hours. Not lending for the hour
//     brought repeats under 5% of preemptions on seeds 1-6 and cut
//     preemptions by 38-56% on `seed-correlated` (BENCHMARKS.md, "The
//     inference pool is not lent into a ramp").

// ReclaimQuiet is how long after inference takes back lent GPUs the pool
// is not lent again: the hour RecentPreemptions covers.
const ReclaimQuiet = time.Hour

// Lending is c as a pass applies it at now, given the measured checkpoint
// bandwidth (0: none yet) and the preemptions of the last hour: with
// Pools.BorrowInference cleared while the inference pool is not lent.
// Everything that reports what a new job could get (the server's
// topology, the control loop's samples, the simulator's) goes through it,
// so the pool's headroom is counted only while it is lent.
func (c Config) Lending(measured float64, recent []PreemptionRecord, now time.Time) Config {
	if c.Pools.BorrowInference && notLent(c, measured, recent, now) != "" {
		c.Pools.BorrowInference = false
	}
	return c
}

// notLent says why the inference pool is not lent now, or "" when it is.
func notLent(c Config, measured float64, recent []PreemptionRecord, now time.Time) string {
	floor := c.withDefaults().Storage.MinBandwidth
	if measured > 0 && measured < floor {
		return fmt.Sprintf("the inference pool is not lent while checkpoint storage bandwidth is %s, below %s (a borrower taken back might not checkpoint in time)",
			rateString(measured), rateString(floor))
	}
	gpus, last := 0, time.Time{}
	for _, r := range recent {
		// A record from after now (a new leader whose clock is behind)
		// counts as just made.
		if r.Reclaim && now.Sub(r.At) < ReclaimQuiet {
			gpus += r.GPUs
			at := r.At
			if at.After(now) {
				at = now
			}
			last = later(last, at)
		}
	}
	if gpus == 0 {
		return ""
	}
	return fmt.Sprintf("the inference pool is not lent until %s: serving took back %d GPUs it had lent within the hour, the last at %s (what is lent while serving grows comes back within minutes)",
		last.Add(ReclaimQuiet).UTC().Format("15:04"), gpus, last.UTC().Format("15:04"))
}

// stopLendingIf stops lending for the rest of the pass when the measure
// or the records say the pool is not lent (notLent), and keeps the
// reason for the jobs that would have borrowed.
func (p *planner) stopLendingIf(measured float64, recent []PreemptionRecord) {
	if !p.cfg.Pools.BorrowInference {
		return
	}
	if p.unlent = notLent(p.cfg, measured, recent, p.now); p.unlent != "" {
		p.cfg.Pools.BorrowInference = false
	}
}

// stopLendingAfterReclaim stops lending for the rest of the pass when the
// inference pass just took back GPUs it had lent: the next pass reads the
// record, this one has only the decision.
func (p *planner) stopLendingAfterReclaim() {
	var recs []PreemptionRecord
	for _, pr := range p.d.Preemptions {
		if pr.Reclaim {
			recs = append(recs, pr.Record(p.now))
		}
	}
	p.stopLendingIf(0, recs)
}
