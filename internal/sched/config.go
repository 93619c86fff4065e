package sched

import (
	"fmt"
	"math"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Config holds the core's policy knobs. The zero value is usable: every
// field has a documented default, applied by withDefaults.
type Config struct {
	Pools Pools `json:"pools" yaml:"pools"`
	// FragTarget is the one-node request size the fragmentation figure is
	// measured against. Default 8 (a TP8 job).
	FragTarget int `json:"frag_target,omitempty" yaml:"frag_target"`
	// MaxRelocations bounds defragmentation moves in flight at once
	// (R4: each move over-provisions for up to a minute). Default 4;
	// negative disables defragmentation.
	MaxRelocations int `json:"max_relocations,omitempty" yaml:"max_relocations"`

	// Aging raises a waiting job's effective priority so that it crosses
	// priority classes eventually (§7, R2).
	Aging Aging `json:"aging" yaml:"aging"`
	// MinRuntime: a job cannot be preempted within this long of starting,
	// which is also the thrash guard after a restart. Default 10m.
	MinRuntime time.Duration `json:"min_runtime,omitempty" yaml:"min_runtime"`
	// RepeatMinRuntime: a job preempted before is not preempted again for
	// other training until it has run this long since its restart.
	// Serving still takes it back at once, as do the reservation it runs
	// inside as backfill and, for an elastic job's growth, any waiting
	// work. One preemption's bonus (Aging.PerPreemption) protects a job
	// only from its equals: on the seed mixes, with equals no longer
	// preempting each other, 8-GPU jobs restarted after a preemption were
	// preempted again within two hours for the next 128-GPU gang, and
	// repeats stayed at 6.6% of preemptions on the worst run. Bounded, so
	// that a job preempted once does not keep a higher-priority gang off
	// its GPUs for the rest of a long run. Default 8h; set it to
	// MinRuntime to keep only that guard (BENCHMARKS.md, "Equals do not
	// preempt each other, nor twice within 8 hours").
	RepeatMinRuntime time.Duration `json:"repeat_min_runtime,omitempty" yaml:"repeat_min_runtime"`
	// GrowAfter: an elastic job grows only this long after its last start
	// or resize (§9.4). Every resize stops the whole job at a checkpoint
	// written through the shared storage and restarts it; growth that is
	// taken back minutes later buys that and nothing else. Default 1h.
	GrowAfter time.Duration `json:"grow_after,omitempty" yaml:"grow_after"`
	// StarvationAfter: a gang (Aging.MinGPUs or more) still waiting after
	// this long raises "this cluster cannot host job X" (R2). Default 4h.
	StarvationAfter time.Duration `json:"starvation_after,omitempty" yaml:"starvation_after"`
	// MaxHolds bounds how many waiting jobs, highest-ranked first, hold
	// free GPUs in one pass (Slurm's reservation depth, in spirit): the
	// top of the queue is protected from being nibbled at; holding for
	// thousands of jobs would only turn the free pool into holds.
	// Default 1: only the head of the queue holds. Every further hold
	// keeps GPUs idle that a mid-size job behind it could run on; with
	// 32 (the default before), on the seed mix, the 8-63 class queued
	// behind holds for gangs that could not start for hours
	// (BENCHMARKS.md, "one hold, a week, no borrow cap").
	MaxHolds int `json:"max_holds,omitempty" yaml:"max_holds"`
	// HoldMinGPUs is the smallest job that may hold free GPUs at all: a
	// gang that size needs a leaf switch's worth of GPUs free at once,
	// which the churn of smaller work never leaves by chance (§7:
	// "wait for 256 free, then grab" never happens). Smaller jobs start
	// from that churn without holding: when the head of the queue was an
	// 8-32 GPU job, its hold kept idle the GPUs the jobs behind it could
	// have run on, and on the seed mix the 8-63 class's p90 was above
	// plain best-fit's on seven of nine runs; with holds for 64+ GPU
	// gangs only, on one (BENCHMARKS.md, "Holds for gangs only").
	// Default 64 (the SLO class bound); 1 lets every job hold.
	HoldMinGPUs int `json:"hold_min_gpus,omitempty" yaml:"hold_min_gpus"`
	// Standby is how many ready replicas each deployment keeps beyond its
	// target, within max_replicas, while its target is above zero: the
	// next scale-up finds them serving instead of paying a model load
	// (and, at the morning ramp, a borrower's checkpoint) first. They take
	// only the inference pool's free GPUs, before training borrows them:
	// never another pool, never a preemption, never a pending reason. On
	// a fleet without an inference pool there are none. Default 2: with
	// one, the seed mix still shed 0.012-0.014% of its demand to loads at
	// the morning ramp; with two, 0.004-0.008% (BENCHMARKS.md, "standby
	// replicas"). Negative disables.
	Standby int `json:"standby_replicas,omitempty" yaml:"standby_replicas"`
	// MaxStarvationAlerts bounds those alerts per pass; the rest are
	// counted in one summary alert. Default 20.
	MaxStarvationAlerts int `json:"max_starvation_alerts,omitempty" yaml:"max_starvation_alerts"`

	// MaxBinds, when above zero, ends the training queue's walk once the
	// pass has placed that many allocations: the jobs below get a
	// pending reason and the next pass goes on. The control loop sets it
	// from control.max_binds_per_pass, the most one pass writes: a fleet
	// coming up beside 100k pending jobs placed tens of thousands of
	// them each pass to write a thousand (BENCHMARKS.md, "Round
	// twelve"). Zero (the simulator) places all that fit.
	MaxBinds int `json:"-" yaml:"-"`

	// PreemptMargin: a training job preempts another only when its
	// priority plus waiting bonus beats the victim's priority plus
	// preemption bonus by at least this much, and the victim's own
	// priority is lower than its own. Preemption bonuses protect victims
	// but give no power to preempt, and waiting bonuses give none over
	// work of the same priority or above, so equals never churn each
	// other. Default 10 (one preemption's worth).
	PreemptMargin int `json:"preempt_margin,omitempty" yaml:"preempt_margin"`

	// SLO orders training by §1's SLO classes before priority.
	SLO SLO `json:"slo" yaml:"slo"`

	Storage Storage `json:"storage" yaml:"storage"`
	Budget  Budget  `json:"budget" yaml:"budget"`
}

// SLO is §1's training SLO as a ranking rule: jobs under MaxGPUs (the
// class whose queue time p90 should stay under 30 minutes) rank ahead of
// larger ones, and a larger job ranks ahead of everything pending once it
// has waited ScheduleAfter ("large jobs are scheduled, not queued").
// Inside a tier, effective priority decides. Defaults 64 GPUs and 168h
// (a week: at 48h, during the seed mix's deadline spikes, the 128-GPU
// gangs due by then took every pod's free GPUs ahead of the SLO class);
// MaxGPUs negative ranks by priority alone.
type SLO struct {
	MaxGPUs       int           `json:"max_gpus,omitempty" yaml:"max_gpus"`
	ScheduleAfter time.Duration `json:"schedule_after,omitempty" yaml:"schedule_after"`
}

// Aging is the effective-priority bonus: PerPreemption for each time the
// job was preempted, PerHour for each whole hour waited by a gang of at
// least MinGPUs (the "gang that cannot fill"). Defaults 10, 5 and
// 8: a priority-0 gang outranks a fresh priority-100 job after 20 hours of
// waiting, or 10 preemptions. Small jobs do not age by waiting: among
// equals, waiting-based aging only turns queueing into preemption churn.
type Aging struct {
	PerPreemption int `json:"per_preemption,omitempty" yaml:"per_preemption"`
	PerHour       int `json:"per_hour,omitempty" yaml:"per_hour"`
	MinGPUs       int `json:"min_gpus,omitempty" yaml:"min_gpus"`
}

// Storage is the checkpoint storage the preemption deadline depends on (R3).
type Storage struct {
	// Bandwidth is the bandwidth assumed when none is measured, in bytes
	// per second. Default 200 GB/s (a cluster filesystem).
	Bandwidth float64 `json:"bandwidth,omitempty" yaml:"bandwidth"`
	// MinBandwidth: below this measured bandwidth preemption stops and a
	// page is raised, because a preemption you cannot checkpoint is a kill.
	// Default 10% of Bandwidth.
	MinBandwidth float64 `json:"min_bandwidth,omitempty" yaml:"min_bandwidth"`
	// BudgetFraction of the bandwidth may be spent on preemption
	// checkpoints in flight at once (concurrent preemptions × size /
	// deadline). Default 1.
	BudgetFraction float64 `json:"budget_fraction,omitempty" yaml:"budget_fraction"`
	// MinDeadline floors the preemption deadline for small checkpoints:
	// process teardown takes time too. Default 30s.
	MinDeadline time.Duration `json:"min_deadline,omitempty" yaml:"min_deadline"`
	// MaxDeadline caps it. A job declares its checkpoint's size (or its
	// workload reports it), so without a cap a job declaring a petabyte
	// got a deadline of hours: asked to yield, it kept its GPUs that long
	// (inference waiting on its own pool), and its write held the
	// checkpoint budget against every other preemption. A checkpoint that
	// cannot be written within the cap is a kill at it. Default 10m (980
	// GB at the default 20 GB/s floor needs 147 s).
	MaxDeadline time.Duration `json:"max_deadline,omitempty" yaml:"max_deadline"`
}

// Budget is the preemption budget's tiers (R6), as fractions of running
// training GPUs preempted per hour.
type Budget struct {
	// Warn: above this, preempt but warn. Default 0.10.
	Warn float64 `json:"warn,omitempty" yaml:"warn"`
	// Page: above this, preempt only for inference below min_replicas;
	// everything above the floor waits and a page is raised. Default 0.25.
	Page float64 `json:"page,omitempty" yaml:"page"`
}

// WithDefaults is c with every zero field at its documented default.
func (c Config) WithDefaults() Config { return c.withDefaults() }

func (c Config) withDefaults() Config {
	if c.FragTarget == 0 {
		c.FragTarget = 8
	}
	if c.MaxRelocations == 0 {
		c.MaxRelocations = 4
	}
	if c.Aging.PerPreemption == 0 {
		c.Aging.PerPreemption = 10
	}
	if c.Aging.PerHour == 0 {
		c.Aging.PerHour = 5
	}
	if c.Aging.MinGPUs == 0 {
		c.Aging.MinGPUs = 8
	}
	if c.PreemptMargin == 0 {
		c.PreemptMargin = 10
	}
	if c.MinRuntime == 0 {
		c.MinRuntime = 10 * time.Minute
	}
	if c.RepeatMinRuntime == 0 {
		c.RepeatMinRuntime = 8 * time.Hour
	}
	if c.StarvationAfter == 0 {
		c.StarvationAfter = 4 * time.Hour
	}
	if c.GrowAfter == 0 {
		c.GrowAfter = time.Hour
	}
	if c.MaxHolds == 0 {
		c.MaxHolds = 1
	}
	if c.HoldMinGPUs == 0 {
		c.HoldMinGPUs = 64
	}
	if c.Standby == 0 {
		c.Standby = 2
	}
	if c.MaxStarvationAlerts == 0 {
		c.MaxStarvationAlerts = 20
	}
	if c.Storage.Bandwidth == 0 {
		c.Storage.Bandwidth = 200e9
	}
	if c.Storage.MinBandwidth == 0 {
		c.Storage.MinBandwidth = c.Storage.Bandwidth / 10
	}
	if c.Storage.BudgetFraction == 0 {
		c.Storage.BudgetFraction = 1
	}
	if c.Storage.MinDeadline == 0 {
		c.Storage.MinDeadline = 30 * time.Second
	}
	if c.Storage.MaxDeadline == 0 {
		c.Storage.MaxDeadline = 10 * time.Minute
	}
	if c.SLO.MaxGPUs == 0 {
		c.SLO.MaxGPUs = 64
	}
	if c.SLO.ScheduleAfter == 0 {
		c.SLO.ScheduleAfter = 168 * time.Hour
	}
	if c.Budget.Warn == 0 {
		c.Budget.Warn = 0.10
	}
	if c.Budget.Page == 0 {
		c.Budget.Page = 0.25
	}
	return c
}

// Validate checks an operator's configuration (before defaults) and names
// the first wrong key as the config file spells it.
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%s: "+format, append([]any{key}, args...)...)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"min_runtime", c.MinRuntime}, {"repeat_min_runtime", c.RepeatMinRuntime}, {"grow_after", c.GrowAfter}, {"starvation_after", c.StarvationAfter}, {"slo.schedule_after", c.SLO.ScheduleAfter},
		{"storage.min_deadline", c.Storage.MinDeadline}, {"storage.max_deadline", c.Storage.MaxDeadline}} {
		if d.v < 0 {
			return bad(d.key, "%v: must not be negative", d.v)
		}
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"max_holds", c.MaxHolds}, {"hold_min_gpus", c.HoldMinGPUs}, {"max_starvation_alerts", c.MaxStarvationAlerts}, {"preempt_margin", c.PreemptMargin},
		{"aging.per_preemption", c.Aging.PerPreemption}, {"aging.per_hour", c.Aging.PerHour}, {"aging.min_gpus", c.Aging.MinGPUs},
		{"pools.small_max_gpus", c.Pools.SmallMaxGPUs}, {"pools.inference_min_gpus", c.Pools.InferenceMinGPUs}} {
		if n.v < 0 {
			return bad(n.key, "%d: must not be negative", n.v)
		}
	}
	if c.FragTarget < 0 || c.FragTarget > model.MaxGPUsPerNode {
		return bad("frag_target", "%d: expected 1 to %d GPUs", c.FragTarget, model.MaxGPUsPerNode)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"storage.bandwidth", c.Storage.Bandwidth}, {"storage.min_bandwidth", c.Storage.MinBandwidth},
		{"budget.warn", c.Budget.Warn}, {"budget.page", c.Budget.Page}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return bad(f.key, "%g: expected a non-negative number", f.v)
		}
	}
	if f := c.Storage.BudgetFraction; f < 0 || f > 1 || math.IsNaN(f) {
		return bad("storage.budget_fraction", "%g: expected a fraction between 0 and 1", f)
	}
	d := c.withDefaults()
	if d.Storage.MinBandwidth > d.Storage.Bandwidth {
		return bad("storage.min_bandwidth", "%g bytes/s is above storage.bandwidth (%g): preemption would never run", d.Storage.MinBandwidth, d.Storage.Bandwidth)
	}
	if d.Storage.MaxDeadline < d.Storage.MinDeadline {
		return bad("storage.max_deadline", "%v is below storage.min_deadline (%v)", d.Storage.MaxDeadline, d.Storage.MinDeadline)
	}
	if d.Budget.Warn > d.Budget.Page {
		return bad("budget.warn", "%g is above budget.page (%g): the warning tier must start below the paging tier", d.Budget.Warn, d.Budget.Page)
	}
	if d.Budget.Page > 10 {
		return bad("budget.page", "%g: a fraction of running training GPUs per hour (0.25 is 25%%/h); %g is %g%%/h", d.Budget.Page, d.Budget.Page, 100*d.Budget.Page)
	}
	return nil
}
