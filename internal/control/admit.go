package control

import (
	"sync"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// admitCache keeps the admission view (sched.Admitter) of the fleet and
// quota tree, rebuilt only when nodes or quotas change, so that a submit
// costs microseconds rather than an index over every node.
type admitCache struct {
	mu    sync.Mutex
	key   [2]int64
	nodes int
	a     *sched.Admitter
}

// admitter runs fn with the current admitter under the cache's lock; the
// admitter is not safe for concurrent use. ok is false when no node has
// reported yet: a shape cannot be judged against an empty fleet.
func (c *Controller) admitter(fn func(a *sched.Admitter)) (ok bool) {
	ac := &c.admit
	ac.mu.Lock()
	defer ac.mu.Unlock()
	var key [2]int64
	c.st.Cache().Read(func(v store.View) { key = [2]int64{v.KindRev(store.Nodes), v.KindRev(store.Quotas)} })
	if key != ac.key || ac.a == nil {
		s := sched.State{Config: c.schedConfig()}
		c.st.Cache().Read(func(v store.View) {
			v.Each(store.Nodes, func(_ string, e store.Entry) { s.Nodes = append(s.Nodes, e.Obj.(model.Node)) })
			v.Each(store.Quotas, func(_ string, e store.Entry) { s.Quotas = append(s.Quotas, e.Obj.(model.Quota)) })
		})
		ac.a, ac.key, ac.nodes = sched.NewAdmitter(s), key, len(s.Nodes)
	}
	if ac.nodes == 0 {
		return false
	}
	fn(ac.a)
	return true
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
