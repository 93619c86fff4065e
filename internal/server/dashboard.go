package server

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// Dashboard is GET /v1/dashboard: everything the fleet page shows, in one
// answer so the page is one consistent picture per refresh.
type Dashboard struct {
	At     time.Time `json:"at"`
	Leader bool      `json:"leader"`
	// Role is the reader's: the page offers node actions to admins.
	Role        string                `json:"role"`
	Topology    api.Topology          `json:"topology"`
	Utilization float64               `json:"utilization"`
	Pods        []DashPod             `json:"pods"`
	Queue       []QueueEntry          `json:"queue"`
	Running     int                   `json:"running_jobs"`
	Deployments []api.Deployment      `json:"deployments"`
	Alerts      []control.AlertRecord `json:"alerts"`
}

// DashPod is one pod's nodes.
type DashPod struct {
	Name  string     `json:"name"`
	Nodes []DashNode `json:"nodes"`
}

// DashNode is one node and its GPUs.
type DashNode struct {
	ID          string `json:"id"`
	Model       string `json:"model"`
	Health      string `json:"health"`
	Quarantined bool   `json:"quarantined,omitempty"`
	Draining    bool   `json:"draining,omitempty"`
	GPUs        []Cell `json:"gpus"`
}

// Cell is one GPU: who has it. Kind is training, inference, backfill,
// reserved (held for a waiting gang), quarantined or free.
type Cell struct {
	Kind     string `json:"kind"`
	Owner    string `json:"owner,omitempty"`
	Alloc    string `json:"alloc,omitempty"`
	Stopping bool   `json:"stopping,omitempty"`
	// Shares and Milli, on a shared GPU: how many shares it holds and
	// the milli they use (the rest is free for more shares).
	Shares int `json:"shares,omitempty"`
	Milli  int `json:"milli,omitempty"`
}

// QueueEntry is one pending job or replica shortfall, in rank order.
type QueueEntry struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	Name      string     `json:"name,omitempty"`
	Org       string     `json:"org,omitempty"`
	Team      string     `json:"team,omitempty"`
	GPUs      int        `json:"gpus"`
	Replicas  int        `json:"replicas,omitempty"` // inference: replicas short
	Topology  string     `json:"topology,omitempty"`
	Priority  int        `json:"priority"`
	Reason    string     `json:"reason"`
	ETA       *time.Time `json:"eta,omitzero"`
	HeldGPUs  int        `json:"held_gpus,omitempty"`
	Waiting   string     `json:"waiting"`
	Submitted time.Time  `json:"submitted,omitzero"`
}

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if !mayReadFleet(p) {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	d := s.Dashboard()
	d.Role = p.Role()
	if p.Kind != RoleAdmin {
		// A team sees the fleet (as GET /v1/nodes shows it) but only its
		// own queue, and no alerts: those are an operator's (admin).
		org, team := p.Team()
		own := d.Queue[:0]
		for _, q := range d.Queue {
			if q.Kind != string(model.OwnerInference) && q.Team == team && q.Org == org {
				own = append(own, q)
			}
		}
		d.Queue, d.Alerts = own, []control.AlertRecord{}
		deps := d.Deployments[:0]
		for _, dep := range d.Deployments {
			// The same rule as GET /v1/deployments/{id}: the whole
			// scope (org/team), never the team's name alone, which
			// another org may also use.
			if mayDeploy(p, dep.Deployment, false) {
				deps = append(deps, dep)
			}
		}
		d.Deployments = deps
	}
	writeJSON(w, 200, d)
}

// Dashboard builds the page's data from the table and the last pass, as
// an admin sees it.
func (s *Server) Dashboard() Dashboard {
	now := time.Now()
	d := Dashboard{At: now, Leader: s.ctl.Leading(), Topology: s.Topology(), Pods: []DashPod{}, Queue: []QueueEntry{},
		Deployments: []api.Deployment{}, Alerts: []control.AlertRecord{}}
	if d.Topology.TotalGPUs > 0 {
		d.Utilization = float64(d.Topology.AllocatedGPUs) / float64(d.Topology.TotalGPUs)
	}
	last := s.ctl.Last()
	held := map[string]map[int]string{} // node → GPU → reservation owner
	if last != nil {
		for _, res := range last.Decision.Reservations {
			for _, h := range res.Held {
				if held[h.Node] == nil {
					held[h.Node] = map[int]string{}
				}
				for _, g := range h.GPUs.Indices() {
					held[h.Node][g] = res.Owner
				}
			}
		}
	}
	pods := map[string]*DashPod{}
	var jobs map[string]*model.Job
	var deps []model.Deployment
	s.st.Cache().Read(func(v store.View) {
		jobs = make(map[string]*model.Job, v.Len(store.Jobs))
		v.Each(store.Jobs, func(_ string, e store.Entry) {
			j := e.Obj.(*model.Job)
			jobs[j.ID] = j
			if j.State == model.JobRunning {
				d.Running++
			}
		})
		v.Each(store.Deployments, func(_ string, e store.Entry) { deps = append(deps, e.Obj.(model.Deployment)) })
		v.Each(store.Nodes, func(_ string, e store.Entry) {
			n := e.Obj.(model.Node)
			dn := DashNode{ID: n.ID, Model: n.Model, Health: string(n.Health), Quarantined: n.Quarantined, Draining: n.Draining,
				GPUs: make([]Cell, n.GPUs)}
			for i := range dn.GPUs {
				switch {
				case n.Quarantined || n.QuarantinedGPUs.Has(i):
					dn.GPUs[i] = Cell{Kind: "quarantined"}
				case held[n.ID][i] != "":
					dn.GPUs[i] = Cell{Kind: "reserved", Owner: held[n.ID][i]}
				default:
					dn.GPUs[i] = Cell{Kind: "free"}
				}
			}
			for _, a := range v.AllocationsOn(n.ID) {
				for _, g := range a.GPUs.Indices() {
					if g >= len(dn.GPUs) {
						continue
					}
					if a.GPUMilli > 0 {
						c := &dn.GPUs[g]
						if c.Shares == 0 {
							*c = Cell{Kind: string(a.OwnerKind)}
						} else {
							c.Owner += ", "
						}
						c.Owner += fmt.Sprintf("%s (%dm)", a.OwnerID, a.GPUMilli)
						c.Shares++
						c.Milli += a.GPUMilli
						continue
					}
					dn.GPUs[g] = Cell{Kind: string(a.OwnerKind), Owner: a.OwnerID, Alloc: a.ID, Stopping: a.Stopping}
				}
			}
			pod := pods[n.Pod]
			if pod == nil {
				pod = &DashPod{Name: n.Pod}
				pods[n.Pod] = pod
			}
			pod.Nodes = append(pod.Nodes, dn)
		})
	})
	for _, p := range pods {
		sort.Slice(p.Nodes, func(i, j int) bool { return p.Nodes[i].ID < p.Nodes[j].ID })
		d.Pods = append(d.Pods, *p)
	}
	sort.Slice(d.Pods, func(i, j int) bool { return d.Pods[i].Name < d.Pods[j].Name })
	d.Queue = s.queue(last, jobs, now)
	sort.Slice(deps, func(i, j int) bool { return deps[i].ID < deps[j].ID })
	for _, dep := range deps {
		d.Deployments = append(d.Deployments, s.deploymentView(dep))
	}
	d.Alerts = append(d.Alerts, s.ctl.Alerts()...)
	sort.Slice(d.Alerts, func(i, j int) bool {
		a, b := d.Alerts[i], d.Alerts[j]
		if (a.ResolvedAt == nil) != (b.ResolvedAt == nil) {
			return a.ResolvedAt == nil
		}
		return a.RaisedAt.After(b.RaisedAt)
	})
	return d
}

// queue lists what waits, in the last pass's rank order (inference
// first), then jobs submitted since that pass.
func (s *Server) queue(last *control.Snapshot, jobs map[string]*model.Job, now time.Time) []QueueEntry {
	out := []QueueEntry{}
	seen := map[string]bool{}
	if last != nil {
		for _, p := range last.Decision.Pending {
			key := p.OwnerID
			if p.Kind == model.OwnerInference {
				q := QueueEntry{ID: p.OwnerID, Kind: string(p.Kind), Replicas: max(p.Missing, 1), Reason: s.inferenceReason(p.OwnerID, p.Reason)}
				out = append(out, q)
				continue
			}
			j, ok := jobs[p.OwnerID]
			if !ok || j.State != model.JobPending || seen[key] {
				continue
			}
			seen[key] = true
			q := jobEntry(j, now)
			q.Reason = p.Reason.Message
			if p.Priority != nil {
				q.Priority = p.Priority.Effective
			}
			if res, ok := last.Reservations[j.ID]; ok {
				for _, h := range res.Held {
					q.HeldGPUs += h.GPUs.Count()
				}
				if !res.ETA.IsZero() {
					t := res.ETA
					q.ETA = &t
				}
			}
			out = append(out, q)
		}
	}
	var fresh []*model.Job
	for _, j := range jobs {
		if j.State == model.JobPending && !seen[j.ID] {
			fresh = append(fresh, j)
		}
	}
	sort.Slice(fresh, func(a, b int) bool { return fresh[a].SubmittedAt.Before(fresh[b].SubmittedAt) })
	for _, j := range fresh {
		q := jobEntry(j, now)
		q.Reason = "waiting for the next scheduling pass"
		out = append(out, q)
	}
	return out
}

func jobEntry(j *model.Job, now time.Time) QueueEntry {
	return QueueEntry{ID: j.ID, Kind: "training", Name: j.Name, Org: j.Org, Team: j.Team, GPUs: j.Shape.GPUs, Topology: string(j.Shape.Topology),
		Priority: j.Priority, Submitted: j.SubmittedAt, Waiting: now.Sub(j.Queued()).Round(time.Second).String()}
}

// inferenceReason is a deployment's pending reason; held back by the
// budget, it is the sentence of the page an operator reads, from the
// page's own numbers.
func (s *Server) inferenceReason(id string, r *sched.Reason) string {
	if r.Constraint == "budget" {
		if a, ok := s.ctl.Alert("budget/" + id); ok && a.ResolvedAt == nil && a.Page != nil {
			return sched.BudgetLine(a.Page)
		}
	}
	return r.Message
}
