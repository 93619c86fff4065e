package control

import (
	"reflect"
	"sync"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// admitCache keeps the admission view (sched.Admitter) of the fleet and
// quota tree, rebuilt only when what admission reads of a node or a quota
// changes, so that a submit costs microseconds rather than an index over
// every node. A node's health, drain and quarantine are not read (a
// shape is judged against the fleet as built), and neither is its boot
// identity: the heartbeats that flip them at thousands a second on a large
// fleet would otherwise rebuild the view for nearly every submit, under
// the lock every submit takes.
type admitCache struct {
	mu    sync.Mutex
	key   [2]int64              // the node and quota table revisions the view is good for
	nodes map[string]model.Node // each node as admission reads it
	a     *sched.Admitter
}

// admissionView is a node with what admission does not read cleared.
func admissionView(n model.Node) model.Node {
	n.Health, n.Draining, n.Quarantined, n.QuarantinedGPUs = "", false, false, 0
	n.BootEpoch, n.BootID, n.NodeUUID, n.IdentityChange = 0, "", "", nil
	return n
}

// admitter runs fn with the current admitter under the cache's lock; the
// admitter is not safe for concurrent use. ok is false when no node has
// reported yet: a shape cannot be judged against an empty fleet.
func (c *Controller) admitter(fn func(a *sched.Admitter)) (ok bool) {
	ac := &c.admit
	ac.mu.Lock()
	defer ac.mu.Unlock()
	var key [2]int64
	fresh := false
	c.st.Cache().Read(func(v store.View) {
		key = [2]int64{v.KindRev(store.Nodes), v.KindRev(store.Quotas)}
		switch {
		case ac.a == nil || key[1] != ac.key[1]:
		case key[0] == ac.key[0]:
			fresh = true
		default:
			fresh = ac.nodesSame(v)
		}
	})
	if fresh {
		ac.key = key
	} else {
		s := sched.State{Config: c.schedConfig()}
		nodes := make(map[string]model.Node, len(ac.nodes))
		c.st.Cache().Read(func(v store.View) {
			// The revisions again: the view is good for what it is
			// built from, which may be newer than the first read.
			key = [2]int64{v.KindRev(store.Nodes), v.KindRev(store.Quotas)}
			v.Each(store.Nodes, func(id string, e store.Entry) {
				n := e.Obj.(model.Node)
				s.Nodes = append(s.Nodes, n)
				nodes[id] = admissionView(n)
			})
			v.Each(store.Quotas, func(_ string, e store.Entry) { s.Quotas = append(s.Quotas, e.Obj.(model.Quota)) })
		})
		ac.a, ac.key, ac.nodes = sched.NewAdmitter(s), key, nodes
	}
	if len(ac.nodes) == 0 {
		return false
	}
	fn(ac.a)
	return true
}

// nodesSame reports whether every node written since the view was built
// reads the same to admission (false when the journal no longer reaches
// back that far, or a node came or went).
func (ac *admitCache) nodesSame(v store.View) bool {
	same := true
	whole := v.ChangedSince(store.Nodes, ac.key[0], func(id string) {
		if !same {
			return
		}
		e, ok := v.Get(store.Nodes, id)
		old, had := ac.nodes[id]
		same = ok && had && reflect.DeepEqual(admissionView(e.Obj.(model.Node)), old)
	})
	return whole && same
}

// Admit checks a job against what can never change by waiting: its own
// fields, quota caps, and the fleet's shape (sched.Admit). Before any node
// has reported, only the fields are checked: the job waits with a reason.
func (c *Controller) Admit(j model.Job) error {
	var err error
	if !c.admitter(func(a *sched.Admitter) { err = a.Admit(j) }) {
		return j.Validate()
	}
	return err
}

// AdmitDeployment is Admit for a deployment's replica shape.
func (c *Controller) AdmitDeployment(d model.Deployment) error {
	var err error
	if !c.admitter(func(a *sched.Admitter) { err = a.AdmitDeployment(d) }) {
		return d.Validate()
	}
	return err
}

// Bound refuses a shape larger than this cluster could ever hold, citing
// the cluster's largest node, pod or fleet; nil before any node reports.
// The API asks it before its own field checks, so that a 200-GPU node
// request is told this cluster's largest node, not the model's limit.
func (c *Controller) Bound(s model.Shape, field string) error {
	var err error
	c.admitter(func(a *sched.Admitter) { err = a.Bound(&s, field) })
	return err
}
