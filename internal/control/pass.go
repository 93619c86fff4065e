package control

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// Documents: the scheduler's own state between passes.
const (
	docReservations = "reservations"
	docRelocations  = "relocations"
	docPreemptions  = "preemptions"
	docConfig       = "config"
)

// relocation is a defragmentation move in flight: the new copy's
// allocations, and when it started.
type relocation struct {
	sched.Relocation
	New       []string  `json:"new_allocations"`
	StartedAt time.Time `json:"started_at"`
}

// Overrides are configuration an operator changed through the API (a
// page's raise_budget); they live in the table so every leader sees them.
type Overrides struct {
	PageBudget float64 `json:"page_budget,omitempty"`
}

// input is one consistent read of the table.
type input struct {
	rev         int64
	state       sched.State
	relocations []relocation
	raw         map[string][]byte // docs as stored
	alerts      map[string]AlertRecord
}

func readDoc[T any](v store.View, id string, out *T) []byte {
	if e, ok := v.Get(store.Docs, id); ok {
		json.Unmarshal(e.Raw(), out)
		return e.Raw()
	}
	return nil
}

// read builds the scheduler's State from the cache.
func (c *Controller) read() *input {
	in := &input{raw: map[string][]byte{}, alerts: map[string]AlertRecord{}}
	s := &in.state
	c.st.Cache().Read(func(v store.View) {
		in.rev = v.Rev()
		// The copies take what changed under the lock and are patched
		// after it (mirror).
		c.nodes.collect(v)
		c.allocs.collect(v)
		c.liveJobs.collect(v)
		v.Each(store.Deployments, func(_ string, e store.Entry) {
			s.Deployments = append(s.Deployments, e.Obj.(model.Deployment))
		})
		v.Each(store.Quotas, func(_ string, e store.Entry) { s.Quotas = append(s.Quotas, e.Obj.(model.Quota)) })
		v.Each(store.Alerts, func(id string, e store.Entry) {
			var a AlertRecord
			if json.Unmarshal(e.Raw(), &a) == nil {
				in.alerts[id] = a
			}
		})
		in.raw[docReservations] = readDoc(v, docReservations, &s.Reservations)
		in.raw[docRelocations] = readDoc(v, docRelocations, &in.relocations)
		in.raw[docPreemptions] = readDoc(v, docPreemptions, &s.RecentPreemptions)
		var recs []checkpointRecord
		readDoc(v, docCheckpoints, &recs)
		s.StorageBandwidth = sched.MeasuredBandwidth(samplesOf(recs))
	})
	s.Nodes, s.Allocations, s.Jobs = c.nodes.apply(), c.allocs.apply(), c.liveJobs.apply()
	slices.SortFunc(s.Deployments, func(a, b model.Deployment) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.Quotas, func(a, b model.Quota) int { return strings.Compare(a.Scope, b.Scope) })
	for _, r := range in.relocations {
		s.Relocations = append(s.Relocations, r.Relocation)
	}
	s.Config = c.schedConfig()
	s.Config.MaxBinds = c.cfg.MaxBindsPerPass
	return in
}

// schedConfig is the configured scheduler config with the table's
// overrides applied.
func (c *Controller) schedConfig() sched.Config {
	cfg := c.cfg.Sched
	var o Overrides
	c.st.Cache().Read(func(v store.View) { readDoc(v, docConfig, &o) })
	if o.PageBudget > 0 {
		cfg.Budget.Page = o.PageBudget
	}
	return cfg
}

// pass is one turn of the loop: housekeeping first (liveness, deadlines,
// relocations that finished); if that wrote anything the next pass plans
// on the new table. Otherwise plan and apply.
func (c *Controller) pass(ctx context.Context, w *store.Writer) error {
	now := c.cfg.Clock()
	start := time.Now()
	in := c.read()
	t := passTimes{start: start, read: time.Since(start)}
	defer t.logIfSlow(c, in)
	ch := c.newChange(w, now)
	mass := c.checkLiveness(ch, in.state.Nodes)
	c.checkDeadlines(ch, in.state.Allocations)
	c.stopOrphans(ch, in)
	relocs, relocsChanged := c.checkRelocations(ch, in)
	if relocsChanged {
		putDoc(ch, in, docRelocations, relocs)
	}
	c.sweepUsage(ch)
	c.sampleFleet(ch, in)
	t.housekeeping = time.Since(start) - t.read
	c.stalled = false
	if !ch.empty() {
		t0 := time.Now()
		_, err := w.Commit(ctx, ch.txn)
		t.commit, t.writes = time.Since(t0), ch.txn.Len()
		c.observeApply(t.commit, err)
		if err != nil {
			c.sampledAt = time.Time{} // a sample in it was not written: read the table again
		}
		return err
	}
	t0 := time.Now()
	d := sched.Plan(in.state, now)
	planTime := time.Since(t0)
	t.plan = planTime
	if mass != nil {
		d.Alerts = append(d.Alerts, *mass)
	}
	if m := c.cfg.Metrics; m != nil {
		m.PlanDone(planTime)
	}
	t0 = time.Now()
	ch = c.newChange(w, now)
	c.deferBinds(&d, c.apply(ch, in, d))
	c.remember(in, d, now, planTime)
	t.apply = time.Since(t0)
	if ch.empty() {
		c.stalled = d.Topology.FreeGPUs == 0 && d.Topology.SharedFreeMilli == 0
		c.observePass(start)
		return nil
	}
	t0 = time.Now()
	_, err := w.Commit(ctx, ch.txn)
	t.commit, t.writes = time.Since(t0), ch.txn.Len()
	c.observeApply(t.commit, err)
	c.observePass(start)
	return err
}

// SlowPass is the pass duration past which the loop logs where the time
// went: four times the 250 ms a pass should take at fleet scale. A pass
// that slow delays every decision behind it by as much, and its phases
// say whether the table read, the plan or etcd is to blame.
const SlowPass = time.Second

// passTimes are one pass's phases, for the slow-pass log.
type passTimes struct {
	start                                   time.Time
	read, housekeeping, plan, apply, commit time.Duration
	writes                                  int
}

func (t *passTimes) logIfSlow(c *Controller, in *input) {
	took := time.Since(t.start)
	if took < SlowPass {
		return
	}
	c.log.Warn("slow pass", "took", took.Round(time.Millisecond), "read", t.read.Round(time.Millisecond),
		"housekeeping", t.housekeeping.Round(time.Millisecond), "plan", t.plan.Round(time.Millisecond),
		"apply", t.apply.Round(time.Millisecond), "commit", t.commit.Round(time.Millisecond), "writes", t.writes,
		"jobs", len(in.state.Jobs), "nodes", len(in.state.Nodes), "allocations", len(in.state.Allocations))
}

func (c *Controller) observePass(start time.Time) {
	if m := c.cfg.Metrics; m != nil {
		m.PassDone(time.Since(start))
	}
}

func (c *Controller) observeApply(d time.Duration, err error) {
	if m := c.cfg.Metrics; m != nil {
		m.ApplyDone(d, err)
	}
}

func (c *Controller) remember(in *input, d sched.Decision, now time.Time, planTime time.Duration) {
	s := &Snapshot{At: now, Rev: in.rev, Decision: d, pending: newPendingIndex(d.Pending),
		Reservations: make(map[string]*sched.Reservation, len(d.Reservations)), PlanTime: planTime}
	for i := range d.Reservations {
		s.Reservations[d.Reservations[i].Owner] = &d.Reservations[i]
	}
	c.last.Store(s)
}

// checkDeadlines turns a stop whose deadline passed into a kill. The
// allocation stays until the agent confirms the exit.
func (c *Controller) checkDeadlines(ch *change, allocs []model.Allocation) {
	for i := range allocs {
		a := &allocs[i]
		if a.Stopping && !a.Killing && !a.StopDeadline.IsZero() && ch.now.After(a.StopDeadline) {
			if m := ch.alloc(a.ID); m != nil {
				m.Killing = true
			}
		}
	}
}

// stopOrphans stops inference replicas whose deployment is gone. A
// deployment's delete stops the replicas its view of the table holds; a
// pass binding a replica writes the allocation, not the deployment, so a
// delete whose view was a moment older than that bind left the replica
// running with no owner (seen in CI: a node's GPUs held for good).
// Level-triggered, every pass: whatever raced, the next pass heals it.
func (c *Controller) stopOrphans(ch *change, in *input) {
	var deps map[string]bool
	for i := range in.state.Allocations {
		a := &in.state.Allocations[i]
		if a.Stopping || a.OwnerKind != model.OwnerInference {
			continue
		}
		if deps == nil {
			deps = make(map[string]bool, len(in.state.Deployments))
			for _, d := range in.state.Deployments {
				deps[d.ID] = true
			}
		}
		if deps[a.OwnerID] {
			continue
		}
		if m := ch.alloc(a.ID); m != nil {
			ch.stop(m, "deleted", ch.now.Add(c.cfg.StopGrace))
			c.log.Warn("replica of a deleted deployment stopped", "allocation", a.ID, "deployment", a.OwnerID, "node", a.NodeID)
		}
	}
}

// checkRelocations finishes moves whose new copy is ready (make before
// break, R4: only once its readiness check passes does the old copy stop)
// and drops moves whose new copy is gone.
func (c *Controller) checkRelocations(ch *change, in *input) ([]relocation, bool) {
	if len(in.relocations) == 0 {
		return nil, false
	}
	var keep []relocation
	changed := false
	exists := make(map[string]bool, len(in.state.Allocations))
	for _, a := range in.state.Allocations {
		exists[a.ID] = true
	}
	for _, r := range in.relocations {
		ready, gone := true, false
		for _, id := range r.New {
			if !exists[id] {
				gone = true
			} else if !c.live.isReady(id) {
				ready = false
			}
		}
		switch {
		case gone:
			changed = true
		case ready:
			for _, id := range r.From {
				if a := ch.alloc(id); a != nil {
					ch.stop(a, "relocated", ch.now.Add(c.cfg.StopGrace))
				}
			}
			changed = true
		default:
			keep = append(keep, r)
		}
	}
	return keep, changed
}

// putDoc writes a document if it differs from what was read.
func putDoc(ch *change, in *input, id string, v any) {
	b, err := json.Marshal(v)
	if err == nil && string(b) == string(in.raw[id]) {
		return
	}
	ch.txn.Put(store.Docs, id, v)
}

// Reservations are the last pass's reservations, as the table holds them:
// the GPUs they keep are not free to new work.
func (c *Controller) Reservations() []sched.Reservation {
	var out []sched.Reservation
	c.st.Cache().Read(func(v store.View) { readDoc(v, docReservations, &out) })
	return out
}

// Preemptions is the record of the last hour's preemptions, as the next
// pass reads it.
func (c *Controller) Preemptions() []sched.PreemptionRecord {
	var out []sched.PreemptionRecord
	c.st.Cache().Read(func(v store.View) { readDoc(v, docPreemptions, &out) })
	return out
}
