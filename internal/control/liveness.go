package control

import (
	"fmt"
	"sync"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// liveness is the leader's memory of heartbeats. It is deliberately not in
// the table: 2,500 heartbeats a second would be 2,500 writes a second for
// nothing. A new leader starts every node's clock at its own start, so a
// failover gives every node a full grace rather than declaring it lost.
type liveness struct {
	mu     sync.Mutex
	since  time.Time
	seen   map[string]time.Time
	actual map[string]model.ActualState // allocation id → as last reported
	ready  map[string]bool              // allocation id → readiness as last reported
	// mass is set while the mass-unreachability guard holds.
	mass bool
}

func newLiveness() *liveness {
	return &liveness{seen: map[string]time.Time{}, actual: map[string]model.ActualState{}, ready: map[string]bool{}}
}

func (l *liveness) reset(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since, l.seen, l.actual, l.ready = now, map[string]time.Time{}, map[string]model.ActualState{}, map[string]bool{}
}

func (l *liveness) heard(rep *model.NodeReport, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[rep.NodeID] = now
	for _, a := range rep.Allocations {
		if a.State == model.ActualExited {
			delete(l.actual, a.ID)
			delete(l.ready, a.ID)
		} else {
			l.actual[a.ID] = a.State
			l.ready[a.ID] = a.Ready
		}
	}
}

// lastHeard is when this leader last heard from a node.
func (l *liveness) lastHeard(node string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[node]
	return t, ok
}

// setMass records whether the mass guard holds and returns whether it
// held before.
func (l *liveness) setMass(on bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.mass
	l.mass = on
	return was
}

// restart gives nodes a fresh grace from now.
func (l *liveness) restart(nodes []string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range nodes {
		l.seen[id] = now
	}
}

// last is when a node was last heard, or the leader's start.
func (l *liveness) last(node string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.seen[node]; ok {
		return t
	}
	return l.since
}

// isReady reports whether the allocation's last report said it serves
// (R4: its readiness check passes).
func (l *liveness) isReady(alloc string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.actual[alloc] == model.ActualRunning && l.ready[alloc]
}

// Ready reports whether an allocation serves: running, and its readiness
// check (if its workload has one) passing, as its node last reported.
func (c *Controller) Ready(alloc string) bool { return c.live.isReady(alloc) }

// checkLiveness marks silent nodes suspect, then lost after the grace;
// losing a node releases its allocations and requeues its jobs. When most
// of the fleet goes silent at once it is the control plane that is cut
// off, not the fleet: nothing is declared lost and a page is raised.
func (c *Controller) checkLiveness(ch *change, nodes []model.Node) *sched.Alert {
	var silent, considered int
	var lost []string
	for i := range nodes {
		n := &nodes[i]
		if n.Health == model.HealthLost {
			continue
		}
		considered++
		age := ch.now.Sub(c.live.last(n.ID))
		if age <= c.cfg.SuspectAfter {
			continue
		}
		silent++
		if n.Health == model.HealthHealthy || n.Health == "" {
			if m := ch.node(n.ID); m != nil {
				m.Health = model.HealthSuspect
			}
		}
		if age > c.cfg.LostAfter {
			lost = append(lost, n.ID)
		}
	}
	if len(lost) == 0 {
		c.live.setMass(false)
		return nil
	}
	if considered >= c.cfg.MassLossMin && float64(silent) > c.cfg.MassLossFraction*float64(considered) {
		c.live.setMass(true)
		return &sched.Alert{ID: "mass-unreachable", Severity: sched.SeverityPage, Kind: "mass_unreachable",
			Message: fmt.Sprintf("%d of %d nodes are silent at once: suspecting the control plane's network; "+
				"no node is declared lost and no work is requeued until they return or an operator drains them", silent, considered)}
	}
	if c.live.setMass(false) {
		// The outage just ended: stragglers get a fresh grace, as after
		// a failover, rather than being declared lost a second before
		// they would have reported.
		c.live.restart(lost, ch.now)
		return nil
	}
	for _, id := range lost {
		n := ch.node(id)
		if n == nil {
			continue
		}
		n.Health = model.HealthLost
		for _, a := range ch.allocsOn(id) {
			ch.gone(a, "node_lost", -1, "")
		}
		c.log.Warn("node lost", "node", id, "silent_for", ch.now.Sub(c.live.last(id)).String())
	}
	return nil
}

// HeartbeatAgeMax is the longest silence among nodes heard since this
// leader started (0 when not leading).
func (c *Controller) HeartbeatAgeMax(now time.Time) float64 {
	if !c.Leading() {
		return 0
	}
	c.live.mu.Lock()
	defer c.live.mu.Unlock()
	worst := 0.0
	for _, t := range c.live.seen {
		worst = max(worst, now.Sub(t).Seconds())
	}
	return worst
}
