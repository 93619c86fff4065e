package control

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// AlertRecord is an alert as the table keeps it: the pass's alert, when it
// was raised and resolved, and the choice a person made on a page.
type AlertRecord struct {
	sched.Alert
	RaisedAt   time.Time  `json:"raised_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	ResolvedAt *time.Time `json:"resolved_at,omitzero"`
	Choice     *Choice    `json:"choice,omitempty"`
}

// Choice records who took which action on a page.
type Choice struct {
	Action string    `json:"action"`
	By     string    `json:"by"`
	At     time.Time `json:"at"`
}

// alertRefresh bounds how often an unchanged-in-kind alert whose numbers
// moved is rewritten: pages carry runtimes that change every second.
const alertRefresh = 30 * time.Second

// resolvedKeep is how long resolved alerts stay listed.
const resolvedKeep = 24 * time.Hour

// apply turns a decision into the change that persists it.
func (c *Controller) apply(ch *change, in *input, d sched.Decision) (written int) {
	now := ch.now
	allocs := 0
	for _, b := range d.Binds {
		if written > 0 && allocs+len(b.Parts) > c.cfg.MaxBindsPerPass {
			break
		}
		c.bind(ch, in, b)
		written++
		allocs += len(b.Parts)
	}
	for _, s := range d.Stops {
		for _, id := range s.Allocations {
			if a := ch.alloc(id); a != nil {
				ch.stop(a, "scale_down", now.Add(c.cfg.StopGrace))
			}
		}
	}
	recent := pruneRecent(in.state.RecentPreemptions, now)
	for _, p := range d.Preemptions {
		reason := "preempted"
		if p.Backfill {
			reason = "backfill_yield"
		}
		if p.ResizeTo > 0 {
			reason = "resized"
		}
		for _, id := range p.Allocations {
			if a := ch.alloc(id); a != nil {
				ch.txn.Unchanged(store.Allocations, id, in.rev)
				ch.stop(a, reason, p.Deadline)
			}
		}
		if j := ch.job(p.JobID); j != nil {
			if p.ResizeTo > 0 {
				from := j.Size
				j.Resized(now, from, p.ResizeTo, "shrink for "+p.For)
				j.Record(now, "shrinking", fmt.Sprintf("%d to %d GPUs for %s; deadline %s", from, p.ResizeTo, p.For, p.Deadline.UTC().Format(time.RFC3339)))
			} else {
				j.Record(now, reason, fmt.Sprintf("for %s; deadline %s", p.For, p.Deadline.UTC().Format(time.RFC3339)))
			}
		}
		recent = append(recent, p.Record(now))
	}
	putDoc(ch, in, docPreemptions, recent)
	relocs := in.relocations
	for _, r := range d.Relocations {
		rec := relocation{Relocation: r, StartedAt: now}
		for _, pt := range r.To.Parts {
			ch.txn.Unchanged(store.Nodes, pt.Node, in.rev)
			a := model.Allocation{ID: newID("a", now), NodeID: pt.Node, GPUs: pt.GPUs, CPUMilli: pt.CPUMilli,
				MemoryMiB: pt.MemoryMiB, OwnerKind: model.OwnerInference, OwnerID: r.Deployment, Replica: r.Replica, CreatedAt: now}
			ch.addAlloc(a)
			rec.New = append(rec.New, a.ID)
		}
		relocs = append(relocs, rec)
	}
	if len(d.Relocations) > 0 {
		putDoc(ch, in, docRelocations, relocs)
	}
	res := d.Reservations
	if res == nil {
		res = []sched.Reservation{}
	}
	putDoc(ch, in, docReservations, res)
	c.applyAlerts(ch, in, d.Alerts)
	return written
}

// deferBinds leaves d's binds past the first written to the next pass:
// they become pending entries, so a job in them says why it is not
// running yet. For the one pass until the next, the reservations doc may
// still list a deferred backfill inside its reservation, and the
// fleet's figures count its GPUs as taken.
func (c *Controller) deferBinds(d *sched.Decision, written int) {
	rest := d.Binds[written:]
	if len(rest) == 0 {
		return
	}
	allocs := 0
	for _, b := range d.Binds[:written] {
		allocs += len(b.Parts)
	}
	why := &sched.Reason{Code: sched.ReasonUnschedulable, Constraint: "max_binds_per_pass",
		Message: fmt.Sprintf("placed, not yet written: this pass wrote its first %d allocations (control.max_binds_per_pass is %d); the next pass places it again", allocs, c.cfg.MaxBindsPerPass)}
	// Training goes ahead of the queue (Position counts it there);
	// replicas go after it, so that a deployment whose later replica
	// waits on something else (a budget page) still says that: the
	// snapshot keeps a deployment's first entry.
	var ahead, replicas []sched.Pending
	for _, b := range rest {
		switch {
		case b.Grow:
			// a running job; its growth is not a wait
		case b.Kind == model.OwnerInference:
			replicas = append(replicas, sched.Pending{Kind: b.Kind, OwnerID: b.OwnerID, Replica: b.Replica, Missing: 1, Reason: why})
		default: // training, bound or backfilled: a pending job either way
			ahead = append(ahead, sched.Pending{Kind: model.OwnerTraining, OwnerID: b.OwnerID, Reason: why})
		}
	}
	d.Pending = append(append(ahead, d.Pending...), replicas...)
	d.Binds = d.Binds[:written]
	if m := c.cfg.Metrics; m != nil {
		m.BindsDeferred(len(rest))
	}
}

func (c *Controller) bind(ch *change, in *input, b sched.Bind) {
	now := ch.now
	nodes := make([]string, 0, len(b.Parts))
	ran := make([]model.AllocRef, 0, len(b.Parts))
	for _, pt := range b.Parts {
		ch.txn.Unchanged(store.Nodes, pt.Node, in.rev)
		id := newID("a", now)
		ran = append(ran, model.AllocRef{ID: id, NodeID: pt.Node})
		ch.addAlloc(model.Allocation{ID: id, NodeID: pt.Node, GPUs: pt.GPUs, GPUMilli: pt.GPUMilli, MIGInstance: pt.MIGInstance, CPUMilli: pt.CPUMilli,
			MemoryMiB: pt.MemoryMiB, OwnerKind: b.Kind, OwnerID: b.OwnerID, Replica: b.Replica,
			Preemptible: b.Preemptible, Borrowed: b.Borrowed, Reservation: b.Reservation, CreatedAt: now})
		if pt.GPUMilli > 0 {
			nodes = append(nodes, fmt.Sprintf("%s[%s:%dm]", pt.Node, pt.GPUs, pt.GPUMilli))
		} else {
			nodes = append(nodes, fmt.Sprintf("%s[%s]", pt.Node, pt.GPUs))
		}
	}
	if b.Kind == model.OwnerInference {
		ch.txn.Unchanged(store.Deployments, b.OwnerID, in.rev)
		return
	}
	ch.txn.Unchanged(store.Jobs, b.OwnerID, in.rev)
	j := ch.job(b.OwnerID)
	if j == nil {
		return
	}
	if b.Grow {
		// A running elastic job gains nodes: the workload hears its new
		// size from the agents and joins them at its next checkpoint.
		r := j.EditRun()
		r.Ran = append(r.Ran, ran...)
		j.Resized(now, b.ResizeFrom, b.ResizeFrom+b.GPUs(), "grow")
		j.Record(now, "growing", fmt.Sprintf("%d to %d GPUs: %s", b.ResizeFrom, b.ResizeFrom+b.GPUs(), strings.Join(nodes, " ")))
		return
	}
	if j.Elastic != nil {
		j.Size = b.GPUs()
	}
	r := j.EditRun()
	r.WaitSeconds += max(0, now.Sub(j.Queued()).Seconds())
	j.State, j.StartedAt, r.Ran = model.JobRunning, now, ran
	if r.LastCheckpointAt.IsZero() {
		r.LastCheckpointAt = now
	}
	what := "bound"
	if b.Kind == model.OwnerBackfill {
		what = "backfilled"
	}
	j.Record(now, what, strings.Join(nodes, " "))
}

func pruneRecent(r []sched.PreemptionRecord, now time.Time) []sched.PreemptionRecord {
	out := []sched.PreemptionRecord{}
	for _, p := range r {
		if now.Sub(p.At) < time.Hour {
			out = append(out, p)
		}
	}
	return out
}

// applyAlerts upserts the pass's alerts and resolves the ones it no longer
// raises.
func (c *Controller) applyAlerts(ch *change, in *input, alerts []sched.Alert) {
	now := ch.now
	raised := map[string]bool{}
	for _, a := range alerts {
		raised[a.ID] = true
		old, ok := in.alerts[a.ID]
		if ok && old.ResolvedAt == nil {
			same := old.Kind == a.Kind && old.Severity == a.Severity
			if same && (equalJSON(old.Alert, a) || now.Sub(old.UpdatedAt) < alertRefresh) {
				continue
			}
		}
		rec := AlertRecord{Alert: a, RaisedAt: now, UpdatedAt: now}
		if ok && old.ResolvedAt == nil {
			rec.RaisedAt, rec.Choice = old.RaisedAt, old.Choice
		}
		ch.txn.Put(store.Alerts, a.ID, rec)
	}
	for id, old := range in.alerts {
		switch {
		case raised[id]:
		case old.ResolvedAt == nil:
			t := now
			old.ResolvedAt, old.UpdatedAt = &t, now
			ch.txn.Put(store.Alerts, id, old)
		case now.Sub(*old.ResolvedAt) > resolvedKeep:
			ch.txn.Delete(store.Alerts, id)
		}
	}
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
