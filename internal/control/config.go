package control

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// Config tunes the control loop. Zero fields take the documented defaults.
type Config struct {
	Sched sched.Config
	// HeartbeatInterval is what agents are told to use; default 5 s.
	HeartbeatInterval time.Duration
	// SuspectAfter without a heartbeat a node is suspect (no new work);
	// default 3 intervals.
	SuspectAfter time.Duration
	// LostAfter without a heartbeat a node is lost and its work requeued;
	// default 12 intervals (one minute). This is the grace.
	LostAfter time.Duration
	// MassLossFraction: when more than this share of nodes are silent at
	// once, the control plane suspects its own network and declares none
	// lost; default 0.5 (only with at least MassLossMin nodes).
	MassLossFraction float64
	MassLossMin      int
	// Tick re-runs the loop without a table change (deadlines, liveness);
	// default 1 s. A pass longer than a quarter tick stretches it to four
	// passes (idleWait).
	Tick time.Duration
	// MaxBindsPerPass caps the allocations one pass writes; default
	// DefaultMaxBindsPerPass.
	// Binds past it, in the decision's order (inference, then training by
	// rank, then growth), wait for the next pass, which places them again
	// on the table the first ones left. A fleet of 12,500 nodes coming up
	// beside 100k pending jobs was one pass binding 29k jobs: a 58k-write
	// transaction that held etcd for 11 s, and every submit, heartbeat and
	// decision behind it. A gang is never split: one larger than the cap
	// is written alone.
	MaxBindsPerPass int
	// StopGrace is the deadline for stops that are not preemptions
	// (scale-down, relocation, cancel of non-preemptible work); default 30 s.
	StopGrace time.Duration
	// UsageRetention is how long finished work's usage records are kept;
	// default 90 days.
	UsageRetention time.Duration
	// JobRetention is how long a finished job's own entry stays in the
	// table (job show, job ls, its events); after it the job is compacted
	// to its usage record, so the live table stays the size of the live
	// work. Default 24 h.
	JobRetention time.Duration
	// HistoryEvery is how often the dashboard's fleet sample is taken
	// (default 30 s), HistoryKeep how long samples are kept (default 6 h).
	HistoryEvery, HistoryKeep time.Duration
	// Quotas are a config file's quotas: `berth kube`'s quota tree. The
	// server's are in its table, and it refuses a file that has any.
	Quotas  []model.Quota
	Clock   func() time.Time
	Logger  *slog.Logger
	Metrics Observer
}

// Observer receives what the loop measures; the server wires it to
// Prometheus. Nil methods are not called.
type Observer interface {
	PlanDone(d time.Duration)
	// PassDone is a planning pass end to end: read, plan, apply.
	PassDone(d time.Duration)
	ApplyDone(d time.Duration, err error)
	HeartbeatLag(d time.Duration)
	// BindsDeferred counts binds a pass left to the next one
	// (MaxBindsPerPass).
	BindsDeferred(n int)
}

// CheckRetention refuses a job retention longer than the usage
// retention: a compacted job is read from its usage record, which must
// outlive the job's own entry.
func (c Config) CheckRetention() error {
	if c.JobRetention < 0 || c.UsageRetention < 0 {
		return fmt.Errorf("job_retention (%v) and usage_retention (%v): must not be negative", c.JobRetention, c.UsageRetention)
	}
	d := c.withDefaults()
	if d.JobRetention > d.UsageRetention {
		return fmt.Errorf("job_retention: %v is longer than usage_retention (%v): a compacted job is read from its usage record, which must outlive it", d.JobRetention, d.UsageRetention)
	}
	return nil
}

// DefaultMaxBindsPerPass is the default cap on what one pass writes. A
// decision waits for the pass in flight and then a pass of its own, so
// while a fleet binds a backlog the heartbeat-to-decision lag is about
// two binding passes. At 1,000 binds (2,000 writes) those took 200-300
// ms on a 2-core machine and 500-900 ms when the API's backlog and a
// collection ran beside them, and the lag's p99 over all probes was
// 943 ms (0.94-1.17 s a run); at 500, 550 ms (0.50-1.25 s a run, five of
// six under 1 s), binding the 100k backlog as fast (BENCHMARKS.md,
// "Round eighteen").
const DefaultMaxBindsPerPass = 500

func (c Config) withDefaults() Config {
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.SuspectAfter == 0 {
		c.SuspectAfter = 3 * c.HeartbeatInterval
	}
	if c.LostAfter == 0 {
		c.LostAfter = 12 * c.HeartbeatInterval
	}
	if c.MassLossFraction == 0 {
		c.MassLossFraction = 0.5
	}
	if c.HistoryEvery == 0 {
		c.HistoryEvery = 30 * time.Second
	}
	if c.HistoryKeep == 0 {
		c.HistoryKeep = 6 * time.Hour
	}
	if c.UsageRetention == 0 {
		c.UsageRetention = 90 * 24 * time.Hour
	}
	if c.JobRetention == 0 {
		c.JobRetention = 24 * time.Hour
	}
	if c.MassLossMin == 0 {
		c.MassLossMin = 4
	}
	if c.Tick == 0 {
		c.Tick = time.Second
	}
	if c.MaxBindsPerPass <= 0 {
		c.MaxBindsPerPass = DefaultMaxBindsPerPass
	}
	if c.StopGrace == 0 {
		c.StopGrace = 30 * time.Second
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
