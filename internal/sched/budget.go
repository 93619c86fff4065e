package sched

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// PreemptionRecord is one preemption in the recent past. The control loop
// keeps the last hour of them in the table; the rate is computed from them.
type PreemptionRecord struct {
	At    time.Time `json:"at"`
	JobID string    `json:"job_id"`
	GPUs  int       `json:"gpus"`
	// Running is the training GPUs that ran when it was made: the rate's
	// denominator never drops below it within the hour (see rate).
	Running int `json:"running,omitempty"`
	// Reclaim: inference took back GPUs it had lent (R1).
	Reclaim bool `json:"reclaim,omitempty"`
}

// Preemption asks a running job to stop: SIGTERM, checkpoint, exit, with
// SIGKILL at Deadline (§5 decision 4, R3). The GPUs are free only when the
// agent confirms the exit or the node is declared lost.
type Preemption struct {
	JobID       string    `json:"job_id"`
	Allocations []string  `json:"allocations"`
	GPUs        int       `json:"gpus"`
	Deadline    time.Time `json:"deadline"`
	Backfill    bool      `json:"backfill,omitempty"`
	// For is who the GPUs go to: a job id, or deployment#replica.
	For string `json:"for"`
	// LostGPUHours is the progress at risk: GPUs × time since the job's
	// last checkpoint (or since it started).
	LostGPUHours float64 `json:"lost_gpu_hours"`
	// Running is the training GPUs running in this pass, for the record.
	Running int `json:"running"`
	// ResizeTo, when set, shrinks an elastic job to that many GPUs: only
	// Allocations stop, the rest run on (§9.4).
	ResizeTo int `json:"resize_to,omitempty"`
	// Reclaim marks inference taking back GPUs of its pool that it had
	// lent to training (R1): the pool is not lent again for a while
	// (Lending).
	Reclaim bool `json:"reclaim,omitempty"`
}

// Record is what the budget and Lending remember of p, made at.
func (p Preemption) Record(at time.Time) PreemptionRecord {
	return PreemptionRecord{At: at, JobID: p.JobID, GPUs: p.GPUs, Running: p.Running, Reclaim: p.Reclaim}
}

// budget is the preemption budget's state during a pass.
type budget struct {
	recent    int     // training GPUs preempted in the last hour, this pass included
	running   int     // training GPUs running
	bandwidth float64 // checkpoint storage bandwidth, measured or assumed
	inFlight  float64 // bytes/s of checkpoint writes already committed to
	degraded  bool
	warned    bool
}

func (p *planner) newBudget() budget {
	b := budget{bandwidth: planBandwidth(p.cfg, p.s.StorageBandwidth)}
	b.degraded = p.s.StorageBandwidth > 0 && p.s.StorageBandwidth < p.cfg.Storage.MinBandwidth
	floor := 0
	for _, r := range p.s.RecentPreemptions {
		if age := p.now.Sub(r.At); age >= 0 && age < time.Hour {
			b.recent += r.GPUs
			floor = max(floor, r.Running)
		}
	}
	seen := map[string]bool{}
	for k, a := range p.s.Allocations {
		if a.OwnerKind == model.OwnerInference {
			continue
		}
		b.running += a.GPUs.Count()
		if a.Stopping && !seen[a.OwnerID] {
			seen[a.OwnerID] = true
			if j := p.owners[k]; j != nil {
				b.inFlight += p.writeRate(j)
			}
		}
	}
	b.running = max(b.running, floor)
	return b
}

// rate is preempted training GPU-hours per hour over running training
// GPU-hours, had extra more GPUs been preempted. The denominator is the
// most training that ran at any preemption of the hour, or now if more:
// after a restart, a node loss or any mass requeue, training is briefly
// near zero, and dividing the hour's preemptions by that read 300%/h for
// a fleet that preempted almost nothing.
func (b *budget) rate(extra int) float64 {
	if b.running == 0 {
		if b.recent+extra == 0 {
			return 0
		}
		return 1
	}
	return float64(b.recent+extra) / float64(b.running)
}

// deadline is how long a job gets to checkpoint and exit:
// checkpoint bytes / bandwidth × 3 (R3), within [MinDeadline, MaxDeadline].
func (p *planner) deadline(j *model.Job) time.Duration {
	return stopDeadline(j, p.cfg.Storage, p.budget.bandwidth)
}

func stopDeadline(j *model.Job, s Storage, bandwidth float64) time.Duration {
	// In float seconds: a petabyte over a slow measure would overflow a
	// Duration.
	d := s.MinDeadline.Seconds()
	if j.Checkpoint != nil && bandwidth > 0 {
		d = max(d, float64(j.Checkpoint.Bytes())/bandwidth*3)
	}
	return time.Duration(min(d, max(s.MaxDeadline, s.MinDeadline).Seconds()) * float64(time.Second))
}

// StopDeadline is the time a job gets to checkpoint and exit when it is
// stopped outside a pass (an operator's choice, a GPU fault), by the same
// rule a pass uses. bandwidth 0 means unmeasured.
func StopDeadline(j *model.Job, c Config, bandwidth float64) time.Duration {
	c = c.withDefaults()
	return stopDeadline(j, c.Storage, planBandwidth(c, bandwidth))
}

// planBandwidth is what deadlines and the checkpoint budget are planned
// with: the measured bandwidth (0: none yet, so the configured one), but
// never more than the configured one. A report faster than the storage is
// rated for is a fluke or a team's lie (MeasuredBandwidth), and deadlines
// planned on it would kill other teams' checkpoints the storage could
// have written. c has its defaults.
func planBandwidth(c Config, measured float64) float64 {
	if measured <= 0 {
		return c.Storage.Bandwidth
	}
	return min(measured, c.Storage.Bandwidth)
}

// StorageView is the checkpoint bandwidth a pass plans with, given the
// measured one (0: none yet), whether it was measured, and the floor below
// which preemption stops: what the topology view shows.
func StorageView(c Config, measured float64) (bandwidth float64, isMeasured bool, floor float64) {
	c = c.withDefaults()
	if measured > 0 {
		return measured, true, c.Storage.MinBandwidth
	}
	return c.Storage.Bandwidth, false, c.Storage.MinBandwidth
}

// writeRate is the checkpoint bandwidth a preemption of j takes while in
// flight: its checkpoint spread over its deadline, and no more than the
// storage has (a checkpoint too large for the capped deadline).
func (p *planner) writeRate(j *model.Job) float64 {
	if j.Checkpoint == nil {
		return 0
	}
	return min(float64(j.Checkpoint.Bytes())/p.deadline(j).Seconds(), p.budget.bandwidth)
}

// verdict is whether a set of victims may be preempted now.
type verdict int

const (
	allowed   verdict = iota
	throttled         // over the budget's page tier: wait, and page a human
	stopped           // storage or checkpoint bandwidth forbids it
)

// allow applies, in order: the storage guard (below MinBandwidth nothing is
// preempted), the checkpoint bandwidth budget (concurrent preemptions ×
// size / deadline within the bandwidth), and the rate tiers of R6 (above
// Page only the inference floor may preempt). Victims on loan (backfill
// yielding to its own reservation, training borrowing the inference pool)
// yield by contract and skip the rate tiers. A reclaim (serving taking
// back its own pool from borrowers) skips the storage guard too: the loan
// was made on those terms, and a borrower whose checkpoint misses its
// deadline loses the work since its last durable checkpoint, where
// keeping it ran on GPUs serving needed until storage recovered
// (`seed-heavy` seed 1: an hour of 44-112 GPUs of demand shed, 0.046% of
// the month's; BENCHMARKS.md, "Equals do not preempt each other, nor
// twice within 8 hours", item 2).
func (p *planner) allow(victims []*victim, floor, onLoan, reclaim bool) (verdict, string) {
	b := &p.budget
	if b.degraded && !reclaim {
		return stopped, p.storageStopped()
	}
	gpus, write := 0, 0.0
	for _, v := range victims {
		gpus += v.gpus
		write += p.writeRate(v.job)
	}
	if limit := b.bandwidth * p.cfg.Storage.BudgetFraction; b.inFlight+write > limit && b.inFlight > 0 {
		return stopped, fmt.Sprintf("checkpoint bandwidth budget: %s of checkpoint writes in flight, %s more would pass %s",
			rateString(b.inFlight), rateString(write), rateString(limit))
	}
	if onLoan {
		return allowed, ""
	}
	r := b.rate(gpus)
	if r > p.cfg.Budget.Page && !floor {
		return throttled, fmt.Sprintf("preemption budget: %.0f%%/h would pass the %.0f%%/h limit; only inference below min_replicas may preempt now",
			100*r, 100*p.cfg.Budget.Page)
	}
	return allowed, ""
}

// storageStopped says why R3's guard stops preemption.
func (p *planner) storageStopped() string {
	return fmt.Sprintf("checkpoint storage bandwidth is %s, below %s: preemption is stopped (a preemption that cannot checkpoint is a kill)",
		rateString(p.budget.bandwidth), rateString(p.cfg.Storage.MinBandwidth))
}

// preempt records the preemption of victims for a beneficiary: an
// inference replica, or a training job.
func (p *planner) preempt(victims []*victim, forWhom string, forInference bool) {
	whole := map[*victim]bool{}
	for _, v := range victims {
		if v.growth != nil {
			whole[v.growth] = true
		}
	}
	for _, v := range victims {
		if v.from != nil && whole[v.from] {
			whole[v] = true // part of a growth whose job yields whole
		}
	}
	for _, v := range victims {
		if whole[v] {
			continue // its job yields whole: the growth goes with the rest
		}
		v.taken = true
		d := p.deadline(v.job)
		ids := make([]string, 0, len(v.allocs))
		for _, a := range v.allocs {
			ids = append(ids, a.ID)
		}
		gpus := v.gpus
		if g := v.growth; g != nil && !g.taken {
			// A whole preemption of an elastic job stops all of it.
			g.taken = true
			for _, a := range g.allocs {
				ids = append(ids, a.ID)
			}
			gpus += g.gpus
		}
		if f := v.from; f != nil {
			// Part of f's growth goes: the rest stays a victim.
			f.allocs = slices.DeleteFunc(slices.Clone(f.allocs), func(a model.Allocation) bool { return slices.Contains(ids, a.ID) })
			f.nodes, f.gpus = p.nodesOf(f.allocs), gpusOf(f.allocs)
			f.taken = len(f.allocs) == 0
		}
		pr := Preemption{JobID: v.job.ID, Allocations: ids, GPUs: gpus,
			Deadline: p.now.Add(d), Backfill: v.tier == tierBackfill, For: forWhom, LostGPUHours: p.lost(v), Running: p.budget.running,
			ResizeTo: v.shrinkTo, Reclaim: forInference && v.inPool}
		if prev := p.preemptionOf(v.job.ID); prev != nil {
			prev.merge(pr)
		} else {
			p.d.Preemptions = append(p.d.Preemptions, pr)
			p.budget.inFlight += p.writeRate(v.job)
		}
		if v.tier != tierBackfill || v.backfillFor != forWhom {
			p.budget.recent += gpus
		}
	}
	if r := p.budget.rate(0); r > p.cfg.Budget.Warn && !p.budget.warned {
		p.budget.warned = true
		p.alert(Alert{ID: "preemption-rate", Severity: SeverityWarn, Kind: "preemption_rate",
			Message: fmt.Sprintf("preemption rate %.0f%%/h is above %.0f%%/h: still preempting; annotate the incident timeline", 100*r, 100*p.cfg.Budget.Warn)})
	}
}

// preemptionOf is this pass's preemption of job, nil if none.
func (p *planner) preemptionOf(job string) *Preemption {
	for i := range p.d.Preemptions {
		if p.d.Preemptions[i].JobID == job {
			return &p.d.Preemptions[i]
		}
	}
	return nil
}

// merge folds a second stop of one job in one pass into the first: a job
// is stopped once a pass, to the smallest size asked (none: all of it),
// with one checkpoint and one restart.
func (pr *Preemption) merge(o Preemption) {
	pr.Allocations = append(pr.Allocations, o.Allocations...)
	pr.GPUs += o.GPUs
	if pr.ResizeTo == 0 || o.ResizeTo == 0 {
		pr.ResizeTo = 0
	} else {
		pr.ResizeTo = min(pr.ResizeTo, o.ResizeTo)
	}
	pr.Backfill = pr.Backfill && o.Backfill
	pr.Reclaim = pr.Reclaim || o.Reclaim
	pr.LostGPUHours = max(pr.LostGPUHours, o.LostGPUHours)
}

// lost is the training progress a preemption of v throws away, in GPU-hours.
func (p *planner) lost(v *victim) float64 {
	since := v.job.Run().LastCheckpointAt
	if since.IsZero() || since.Before(v.job.StartedAt) {
		since = v.job.StartedAt
	}
	if since.IsZero() {
		since = v.created
	}
	h := p.now.Sub(since).Hours()
	if h < 0 {
		h = 0
	}
	gpus := v.gpus
	if v.total > 0 {
		gpus = v.total // a resize restarts every worker from the checkpoint
	}
	return math.Round(float64(gpus)*h*10) / 10
}

func rateString(bps float64) string {
	if bps < 10e9 {
		return fmt.Sprintf("%.2g GB/s", bps/1e9)
	}
	return fmt.Sprintf("%.0f GB/s", bps/1e9)
}
