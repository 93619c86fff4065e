package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// ErrNotLeader means this process does not hold the election; the write
// belongs to the leader.
var ErrNotLeader = errors.New("this server is not the leader")

// ErrLostLeadership ends Lead when the election lease is gone.
var ErrLostLeadership = errors.New("leadership lost")

// Controller is the control loop and the table's mutations.
type Controller struct {
	// usageSwept and jobsSwept are when the loop last looked for expired
	// usage records and for finished jobs past the retention (the loop's
	// goroutine only).
	usageSwept, jobsSwept time.Time
	// sampledAt is the newest history sample's time (the loop's
	// goroutine only); zero until read from the table.
	sampledAt time.Time
	st        *store.Store
	cfg       Config
	log       *slog.Logger

	mu sync.RWMutex
	w  *store.Writer // nil unless leading

	live *liveness
	last atomic.Pointer[Snapshot]
	kick chan struct{}
	// urgent cuts the loop's rest short: GPUs came free, and whatever
	// waits for them should not wait out the rest too.
	urgent chan struct{}
	// stalled says the last pass wrote nothing and left no GPU free (the
	// loop's goroutine only): until GPUs come free (urgent), the next
	// pass can only decide the same, so the loop rests a whole tick.
	stalled bool
	// wakeup ends a stalled rest only: a node joined or came back, or an
	// operator changed something (a deployment, a node, a quota, a
	// budget) that may change a full fleet's decision.
	wakeup chan struct{}
	// The loop's copies of the tables it plans over (see mirror).
	liveJobs mirror[*model.Job]
	allocs   mirror[model.Allocation]
	nodes    mirror[model.Node]
	admit    admitCache
}

// Snapshot is what the last pass decided, for reads: pending reasons,
// reservations, the topology as decided.
type Snapshot struct {
	At       time.Time
	Rev      int64
	Decision sched.Decision
	// Reservations indexes Decision.Reservations by owner id.
	Reservations map[string]*sched.Reservation
	PlanTime     time.Duration

	pending *pendingIndex // Decision.Pending by owner id
}

// Pending is the pass's entry for a job or deployment, nil when the pass
// did not leave it pending. A training job's is its last entry; a
// deployment's its first (the replica it waits on first).
func (s *Snapshot) Pending(id string) *sched.Pending { return s.pending.get(id) }

// Position is a pending training job's place in the pass's queue, from
// 1: the core appends training's pending entries in its rank order
// (SLO tier, effective priority, submit time), so it is the order the
// core will try them in. False when the pass did not rank the job.
func (s *Snapshot) Position(id string) (int, bool) { return s.pending.position(id) }

// New builds a controller over a store. It does nothing until Lead.
func New(st *store.Store, cfg Config) *Controller {
	cfg = cfg.withDefaults()
	return &Controller{st: st, cfg: cfg, log: cfg.Logger, live: newLiveness(), kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1), wakeup: make(chan struct{}, 1),
		liveJobs: newMirror(store.Jobs, jobID, unfinished), allocs: newMirror(store.Allocations, allocID, nil),
		nodes: newMirror(store.Nodes, nodeID, nil)}
}

// Config is the effective configuration, defaults applied.
func (c *Controller) Config() Config { return c.cfg }

// Store is the table the controller works on.
func (c *Controller) Store() *store.Store { return c.st }

// Last is the last pass's snapshot; nil before the first.
func (c *Controller) Last() *Snapshot { return c.last.Load() }

// Writer is the current writer, or ErrNotLeader.
func (c *Controller) Writer() (*store.Writer, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.w == nil {
		return nil, ErrNotLeader
	}
	return c.w, nil
}

// Leading reports whether this controller holds the election.
func (c *Controller) Leading() bool {
	_, err := c.Writer()
	return err == nil
}

// urge ends the loop's rest after a pass, if it is resting.
func (c *Controller) urge() {
	select {
	case c.urgent <- struct{}{}:
	default:
	}
}

// wake ends the loop's rest after a pass that stalled, if it is resting.
func (c *Controller) wake() {
	select {
	case c.wakeup <- struct{}{}:
	default:
	}
}

// Kick asks for a pass now, a full fleet's included.
func (c *Controller) Kick() {
	c.nudge()
	c.wake()
}

// nudge asks for a pass once the loop's rest is over: a submit, which on a
// full fleet can only lengthen the queue (one that preempts waits at most
// a tick).
func (c *Controller) nudge() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Lead runs the loop while l holds: on every table change and every tick,
// one pass. It returns when ctx ends or leadership is lost.
func (c *Controller) Lead(ctx context.Context, l *store.Leadership) error {
	w := l.Writer()
	c.live.reset(c.cfg.Clock())
	c.sampledAt = time.Time{} // another leader may have sampled since
	c.mu.Lock()
	c.w = w
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.w = nil
		c.mu.Unlock()
	}()
	changed, stop := c.st.Cache().Subscribe()
	defer stop()
	tick := time.NewTimer(c.cfg.Tick)
	defer tick.Stop()
	c.log.Info("leading", "fence", w.Fence(), "id", l.ID())
	for {
		t0 := time.Now()
		err := c.pass(ctx, w)
		took := time.Since(t0)
		// Leave the CPU to the API for as long as the pass took (up to
		// a tick): a burst of submits then costs a few passes, not one
		// pass per submit, and while passes are shorter than a tick the
		// loop takes at most half a core. (Capped at 100 ms, a loaded
		// fleet's 250 ms passes took 70% of one, most of them deciding
		// nothing new.) GPUs coming free end the rest: a job waiting
		// for them is what the heartbeat-to-decision lag measures. A
		// lost lease ends it too: resting on, this server would go on
		// taking writes (each fenced, so refused) instead of forwarding
		// them to the new leader.
		//
		// After a pass that wrote nothing on a fleet with no GPU free,
		// the rest is a whole tick: only GPUs coming free (which end
		// it), a node joining or coming back, an operator's change
		// (both wake it) or a submit that preempts can change the next
		// decision. With every GPU taken and 200 submits a second, each
		// submit's pass decided nothing, at half a core (BENCHMARKS.md,
		// "Round nine"). A submit now waits at most a tick for its first
		// pass.
		wait, woken := min(took, c.cfg.Tick), (<-chan struct{})(nil) // nil: never ready
		if c.stalled {
			wait, woken = c.cfg.Tick, c.wakeup
		}
		rest := time.NewTimer(wait)
		select {
		case <-rest.C:
		case <-c.urgent:
			rest.Stop()
		case <-woken:
			rest.Stop()
		case <-ctx.Done():
			rest.Stop()
		case <-l.Done():
			rest.Stop()
			return ErrLostLeadership
		}
		tick.Reset(idleWait(c.cfg.Tick, took))
		switch {
		case errors.Is(err, store.ErrFenced):
			return ErrLostLeadership
		case errors.Is(err, store.ErrConflict):
			continue // the table moved under the pass: decide again
		case err != nil && ctx.Err() == nil:
			c.log.Warn("control pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.Done():
			return ErrLostLeadership
		case <-changed:
		case <-tick.C:
		case <-c.kick:
		}
	}
}

// idleWait is how long the loop waits for a table change before it
// passes anyway (for deadlines and liveness): the tick, or four times the
// last pass when that is longer. With a million jobs pending a pass takes
// over a second; on the tick alone an idle leader planned back to back
// and held more than a core. Paced so, passes nothing asked for take at
// most a fifth of one, and time-driven work (a stop deadline, a silent
// node) is noticed within max(tick, 4 passes) instead of one tick.
func idleWait(tick, lastPass time.Duration) time.Duration {
	return max(tick, 4*lastPass)
}

// newID makes an id that sorts by creation time: prefix, milliseconds in
// base 36, and 8 random bytes so that ids made in one millisecond differ.
// A pass makes up to control.max_binds_per_pass of them with one clock
// reading: with 4 bytes, two of a 1,000-bind pass met about once in 8,000
// passes, and the duplicate key failed the pass's whole transaction.
func newID(prefix string, now time.Time) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + "-" + strconv.FormatInt(now.UnixMilli(), 36) + hex.EncodeToString(b[:])
}

// LastHeartbeat is when this server, leading, last heard from a node; the
// zero time on a follower or before the node's first heartbeat to this
// leader (liveness is the leader's memory, not the table's).
func (c *Controller) LastHeartbeat(node string) time.Time {
	t, _ := c.live.lastHeard(node)
	return t
}
