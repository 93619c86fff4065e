package control

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// change gathers the writes of one transaction. Every object it modifies
// is read from the cache once, and the transaction is made conditional on
// that object not having changed since: optimistic concurrency, so two
// writers of one leader (the loop, a heartbeat, an API call) never
// overwrite each other's work; the loser retries on the new table.
type change struct {
	c      *Controller
	txn    *store.Txn
	now    time.Time
	nodes  map[string]*model.Node
	jobs   map[string]*model.Job
	deps   map[string]*model.Deployment
	allocs map[string]*model.Allocation // nil value: deleted
	order  []string                     // alloc ids in first-touch order
	// base holds each loaded object as the cache has it: flush writes
	// only what differs, so a read-only look costs no write.
	base   map[string]loaded
	writes int
	// freed: an allocation ended, so GPUs came free (the loop's rest is
	// cut short for it).
	freed bool
	// grew: a node joined or became schedulable again (a full fleet's
	// rest is cut short for it).
	grew bool
}

func (c *Controller) newChange(w *store.Writer, now time.Time) *change {
	return &change{c: c, txn: w.Txn(), now: now, nodes: map[string]*model.Node{}, jobs: map[string]*model.Job{},
		deps: map[string]*model.Deployment{}, allocs: map[string]*model.Allocation{}, base: map[string]loaded{}}
}

// loaded is an object as a change loaded it: the cache's entry, and its
// JSON when the load encoded it.
type loaded struct {
	store.Entry
	raw []byte
}

func load[T any](ch *change, k store.Kind, id string) (*T, bool) {
	var out T
	var base loaded
	ok := false
	ch.c.st.Cache().Read(func(v store.View) {
		e, found := v.Get(k, id)
		if !found {
			return
		}
		base.Entry = e
		// A copy that shares no memory with the cache: slices (a job's
		// history) are changed in place. A node, which every heartbeat
		// loads, is cloned; the rest are decoded afresh.
		if n, isNode := e.Obj.(model.Node); isNode {
			if p, want := any(&out).(*model.Node); want {
				*p, ok = n.Clone(), true
				return
			}
		}
		base.raw = e.Raw()
		ok = json.Unmarshal(base.raw, &out) == nil
	})
	if !ok {
		return nil, false
	}
	ch.base[string(k)+"/"+id] = base
	ch.txn.Unchanged(k, id, base.ModRev)
	return &out, true
}

// cached returns an object for modification, loading it once per change;
// nil if absent.
func cached[T any](ch *change, m map[string]*T, k store.Kind, id string) *T {
	if v, ok := m[id]; ok {
		return v
	}
	v, ok := load[T](ch, k, id)
	if !ok {
		return nil
	}
	m[id] = v
	return v
}

// node returns the node for modification; nil if unknown.
func (ch *change) node(id string) *model.Node { return cached(ch, ch.nodes, store.Nodes, id) }

// newNode records a node created by this change.
func (ch *change) newNode(n model.Node) *model.Node {
	ch.txn.Absent(store.Nodes, n.ID)
	ch.nodes[n.ID] = &n
	return &n
}

func (ch *change) job(id string) *model.Job { return cached(ch, ch.jobs, store.Jobs, id) }

func (ch *change) deployment(id string) *model.Deployment {
	return cached(ch, ch.deps, store.Deployments, id)
}

// alloc returns an allocation for modification; nil if absent or deleted
// by this change.
func (ch *change) alloc(id string) *model.Allocation {
	if a, ok := ch.allocs[id]; ok {
		return a
	}
	a, ok := load[model.Allocation](ch, store.Allocations, id)
	if !ok {
		return nil
	}
	ch.allocs[id] = a
	ch.order = append(ch.order, id)
	return a
}

// addAlloc creates an allocation.
func (ch *change) addAlloc(a model.Allocation) {
	ch.txn.Create(store.Allocations, a.ID, a)
	ch.writes++
}

// allocsOf lists an owner's allocations as this change sees them.
func (ch *change) allocsOf(owner string) []*model.Allocation {
	return ch.allocsBy(func(v store.View) []model.Allocation { return v.AllocationsOf(owner) })
}

// allocsOn lists a node's allocations as this change sees them.
func (ch *change) allocsOn(node string) []*model.Allocation {
	return ch.allocsBy(func(v store.View) []model.Allocation { return v.AllocationsOn(node) })
}

func (ch *change) allocsBy(list func(store.View) []model.Allocation) []*model.Allocation {
	var ids []string
	ch.c.st.Cache().Read(func(v store.View) {
		for _, a := range list(v) {
			ids = append(ids, a.ID)
		}
	})
	var out []*model.Allocation
	for _, id := range ids {
		if a := ch.alloc(id); a != nil {
			out = append(out, a)
		}
	}
	return out
}

// stop asks an allocation to stop by a deadline, for a reason. A stop
// already in flight keeps its earlier deadline.
func (ch *change) stop(a *model.Allocation, reason string, deadline time.Time) {
	if a.Stopping {
		if deadline.Before(a.StopDeadline) {
			a.StopDeadline = deadline
		}
		return
	}
	a.Stopping, a.StopDeadline, a.StopReason, a.StopAt = true, deadline, reason, ch.now
}

// stopDeadline is how long the owner of a gets to exit cleanly.
func (ch *change) stopDeadline(a *model.Allocation) time.Time {
	if a.OwnerKind != model.OwnerInference {
		if j := ch.job(a.OwnerID); j != nil {
			return ch.now.Add(sched.StopDeadline(j, ch.c.schedConfig(), ch.c.MeasuredBandwidth()))
		}
	}
	return ch.now.Add(ch.c.cfg.StopGrace)
}

// gone removes an allocation whose process is gone (exited, or its node
// lost or restarted) and settles its job: when the last allocation of a
// job is gone, the job completes, fails, is cancelled or goes back to the
// queue, by why its allocations stopped. cause is the stop reason when the
// allocation was not already stopping.
func (ch *change) gone(a *model.Allocation, cause string, exit int, checkpoint string) {
	ch.allocs[a.ID] = nil
	ch.freed = true
	if a.OwnerKind == model.OwnerInference {
		ch.recordReplica(a)
		return
	}
	j := ch.job(a.OwnerID)
	if j == nil || j.State.Terminal() && j.State != model.JobCancelled {
		return
	}
	r := j.EditRun()
	r.GPUSeconds += heldFor(a, ch.now)
	reason := cause
	if a.Stopping && a.StopReason != "" {
		reason = a.StopReason
	}
	if checkpoint != "" {
		r.Restore, r.LastCheckpointAt = checkpoint, ch.now
	}
	j.Record(ch.now, "allocation_gone", fmt.Sprintf("%s on %s: %s, exit %d", a.ID, a.NodeID, reason, exit))
	var rest []*model.Allocation
	for _, o := range ch.allocsOf(a.OwnerID) {
		if o.ID != a.ID {
			rest = append(rest, o)
		}
	}
	failed := reason == "exited" && exit != 0 || reason == "gang_failed"
	if len(rest) > 0 && reason == "resized" {
		return // an elastic job shrank: the rest run on
	}
	if len(rest) > 0 {
		// A gang that lost a member cannot make progress: the rest
		// checkpoint and exit. If the member failed, the job fails; if
		// it was lost, the job goes back whole.
		switch {
		case failed:
			for _, o := range rest {
				ch.stop(o, "gang_failed", ch.stopDeadline(o))
			}
		case requeues(reason):
			for _, o := range rest {
				ch.stop(o, "gang_broken", ch.stopDeadline(o))
			}
		}
		return
	}
	j.Size = 0
	switch {
	case j.State == model.JobCancelled:
		ch.recordJob(j)
		return
	case reason == "exited" && exit == 0:
		j.State, j.FinishedAt = model.JobCompleted, ch.now
		j.Record(ch.now, "completed", "")
		ch.recordJob(j)
	case failed:
		j.State, j.FinishedAt = model.JobFailed, ch.now
		j.Record(ch.now, "failed", fmt.Sprintf("%s, exit %d on %s", reason, exit, a.NodeID))
		ch.recordJob(j)
	default:
		if reason == "preempted" || reason == "backfill_yield" {
			j.PreemptCount++
		}
		j.State, j.QueuedAt, j.StartedAt = model.JobPending, ch.now, time.Time{}
		j.Record(ch.now, "requeued", reason)
	}
}

// peekJob reads a job without loading it into the change (no decode, no
// transaction condition): for the per-heartbeat checks that almost never
// lead to a write.
func (ch *change) peekJob(id string) (model.Job, bool) {
	if j, ok := ch.jobs[id]; ok && j != nil {
		return *j, true
	}
	var out model.Job
	ok := false
	ch.c.st.Cache().Read(func(v store.View) {
		if e, found := v.Get(store.Jobs, id); found {
			out, ok = *e.Obj.(*model.Job), true
		}
	})
	return out, ok
}

// newCheckpoint reports whether path, reported by a running allocation,
// is a checkpoint its training job has not recorded yet (recordCheckpoint
// would change the job), reading without loading anything for change.
func (ch *change) newCheckpoint(alloc, path string) bool {
	if path == "" {
		return false
	}
	var owner string
	if a, ok := ch.allocs[alloc]; ok {
		if a == nil || a.OwnerKind == model.OwnerInference {
			return false
		}
		owner = a.OwnerID
	} else {
		ch.c.st.Cache().Read(func(v store.View) {
			if e, found := v.Get(store.Allocations, alloc); found {
				if a := e.Obj.(model.Allocation); a.OwnerKind != model.OwnerInference {
					owner = a.OwnerID
				}
			}
		})
	}
	if owner == "" {
		return false
	}
	j, ok := ch.peekJob(owner)
	return ok && !j.State.Terminal() && j.Run().Restore != path
}

// recordCheckpoint keeps the checkpoint a running allocation reported as
// its job's restore point, so whatever ends the allocation (a lost node,
// a reboot, a quarantine, a kill at the deadline) the job goes back from
// there and not from an older one. Every heartbeat reports it; the job
// is loaded only when it changed.
func (ch *change) recordCheckpoint(a *model.Allocation, path string) {
	if j, ok := ch.peekJob(a.OwnerID); !ok || j.Run().Restore == path {
		return
	}
	j := ch.job(a.OwnerID)
	if j == nil || j.State.Terminal() || j.Run().Restore == path {
		return
	}
	r := j.EditRun()
	r.Restore, r.LastCheckpointAt = path, ch.now
}

// requeues reports whether a stop reason sends the job back to the queue
// (as opposed to ending it).
func requeues(reason string) bool {
	switch reason {
	case "exited", "cancelled", "gang_failed":
		return false
	}
	return true
}

// empty reports whether the change writes nothing.
func (ch *change) empty() bool { return ch.flush().Len() == 0 }

// flush turns the gathered modifications into the transaction's writes.
// Safe to call more than once: only the first adds writes.
func (ch *change) flush() *store.Txn {
	if ch.writes < 0 {
		return ch.txn
	}
	for _, id := range sortedKeys(ch.nodes) {
		ch.put(store.Nodes, id, ch.nodes[id])
	}
	for _, id := range sortedKeys(ch.jobs) {
		ch.put(store.Jobs, id, ch.jobs[id])
	}
	for _, id := range sortedKeys(ch.deps) {
		ch.put(store.Deployments, id, ch.deps[id])
	}
	for _, id := range ch.order {
		if a := ch.allocs[id]; a == nil {
			ch.txn.Delete(store.Allocations, id)
		} else {
			ch.put(store.Allocations, id, a)
		}
	}
	ch.writes = -1
	return ch.txn
}

// put writes v unless it encodes to what was loaded. Equal values encode
// alike, so most looks (a heartbeat that changes nothing) are settled
// without encoding either; values that differ may still encode alike (an
// empty slice and a nil one), so those are compared as JSON.
func (ch *change) put(k store.Kind, id string, v any) {
	if base, ok := ch.base[string(k)+"/"+id]; ok {
		if equalValues(v, base.Obj) {
			return
		}
		if base.raw == nil {
			base.raw = base.Raw()
		}
		if b, err := json.Marshal(v); err == nil && bytes.Equal(b, base.raw) {
			return
		}
	}
	ch.txn.Put(k, id, v)
}

// equalValues reports whether a and b, or the values they point to, are
// deeply equal; false when either is nil.
func equalValues(a, b any) bool {
	if a == nil || b == nil {
		return false
	}
	va, vb := reflect.Indirect(reflect.ValueOf(a)), reflect.Indirect(reflect.ValueOf(b))
	return va.IsValid() && vb.IsValid() && reflect.DeepEqual(va.Interface(), vb.Interface())
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
