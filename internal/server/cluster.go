package server

import (
	"net/http"
	"sort"
	"strings"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// fleet reads nodes and allocations from the table.
func (s *Server) fleet() ([]model.Node, []model.Allocation) {
	var nodes []model.Node
	var allocs []model.Allocation
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Nodes, func(_ string, e store.Entry) { nodes = append(nodes, e.Obj.(model.Node)) })
		v.Each(store.Allocations, func(_ string, e store.Entry) { allocs = append(allocs, e.Obj.(model.Allocation)) })
	})
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, allocs
}

// Topology computes the free-set view from the table as it is now.
func (s *Server) Topology() api.Topology {
	nodes, allocs := s.fleet()
	cfg := s.ctl.Config().Sched
	ix := sched.NewIndex(nodes, allocs, cfg)
	// The same figure the simulator samples: reserved GPUs out, and only
	// the pools a new training job may use.
	measured := s.ctl.MeasuredBandwidth()
	sum := sched.Available(ix, s.ctl.Reservations(), cfg.Lending(measured, s.ctl.Preemptions(), s.ctl.Config().Clock()), true)
	t := api.Topology{LargestPlaceable: api.Largest(sum.LargestPlaceable), FreeNodesFull: sum.FreeNodesFull,
		FreeByNode: sum.FreeByNode, FreeGPUs: sum.FreeGPUs, FragmentedGPUs: sum.FragmentedGPUs, FragTarget: sum.FragTarget,
		Pods: []api.PodFree{}, SharedGPUs: sum.SharedGPUs, SharedFreeMilli: sum.SharedFreeMilli, LargestShare: sum.LargestShare}
	if t.FreeByNode == nil {
		t.FreeByNode = map[string]int{}
	}
	t.CheckpointBandwidth, t.Measured, t.CheckpointFloor = sched.StorageView(cfg, measured)
	t.TotalGPUs, t.AllocatedGPUs = model.SchedulableGPUs(nodes), model.AllocatedGPUs(allocs)
	// Milli left on shared GPUs is free capacity no whole-GPU request can
	// use: it counts as free and as fragmented.
	sharedFree := float64(t.SharedFreeMilli) / 1000
	if free := float64(t.FreeGPUs) + sharedFree; free > 0 {
		t.Fragmentation = (float64(t.FragmentedGPUs) + sharedFree) / free
	}
	for _, p := range sum.Pods {
		t.Pods = append(t.Pods, api.PodFree(p))
	}
	return t
}

func (s *Server) topology(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, s.Topology())
}

func (s *Server) nodeView(n model.Node, allocs []model.Allocation) api.Node {
	var used model.GPUMask
	for _, a := range allocs {
		used |= a.GPUs
	}
	v := api.Node{Node: n, AllocatedMask: used.String(), LastHeartbeat: s.ctl.LastHeartbeat(n.ID)}
	if n.Schedulable() {
		v.FreeGPUs = n.GPUs - (used | n.QuarantinedGPUs).Count()
	}
	return v
}

func mayReadFleet(p *Principal) bool { return p.Kind == RoleAdmin || p.Kind == RoleTeam }

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if !mayReadFleet(p) {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	out := api.NodeList{Nodes: []api.Node{}}
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Nodes, func(id string, e store.Entry) {
			out.Nodes = append(out.Nodes, s.nodeView(e.Obj.(model.Node), v.AllocationsOn(id)))
		})
	})
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].ID < out.Nodes[j].ID })
	writeJSON(w, 200, out)
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if !mayReadFleet(p) {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	var out *api.Node
	s.st.Cache().Read(func(v store.View) {
		if e, ok := v.Get(store.Nodes, r.PathValue("id")); ok {
			n := s.nodeView(e.Obj.(model.Node), v.AllocationsOn(r.PathValue("id")))
			out = &n
		}
	})
	if out == nil {
		s.fail(w, r, control.ErrNotFound)
		return
	}
	writeJSON(w, 200, out)
}

func (s *Server) nodeAction(w http.ResponseWriter, r *http.Request) {
	_, ok := s.admin(w, r)
	if !ok {
		return
	}
	act := control.NodeAction(r.PathValue("action"))
	switch act {
	case control.Drain, control.Undrain, control.Quarantine, control.Unquarantine:
	default:
		s.fail(w, r, &api.Error{Code: "not_found", Field: "action",
			Message: "unknown node action " + string(act) + ": expected drain, undrain, quarantine or unquarantine"})
		return
	}
	n, err := s.ctl.SetNode(r.Context(), r.PathValue("id"), act)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, n)
}

// quotaUse sums GPUs in use per scope and the borrowed part.
func (s *Server) quotaUse() (map[string]int, map[string]int) {
	used, borrowed := map[string]int{}, map[string]int{}
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Allocations, func(_ string, e store.Entry) {
			a := e.Obj.(model.Allocation)
			if a.OwnerKind == model.OwnerInference {
				return
			}
			je, ok := v.Get(store.Jobs, a.OwnerID)
			if !ok {
				return
			}
			j := je.Obj.(*model.Job)
			for _, sc := range j.Scopes() {
				used[sc] += a.GPUs.Count()
				if a.Borrowed {
					borrowed[sc] += a.GPUs.Count()
				}
			}
		})
	})
	return used, borrowed
}

// mayReadQuota: admins read all; a team reads the scopes on its path.
func mayReadQuota(p *Principal, scope string) bool {
	if p.Kind == RoleAdmin {
		return true
	}
	if p.Kind != RoleTeam {
		return false
	}
	org, team := p.Team()
	parts := strings.Split(scope, "/")
	return len(parts) >= 2 && parts[0] == org && parts[1] == team
}

func (s *Server) listQuotas(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if !mayReadFleet(p) {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	used, borrowed := s.quotaUse()
	out := api.QuotaList{Quotas: []api.Quota{}}
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Quotas, func(id string, e store.Entry) {
			if mayReadQuota(p, id) {
				out.Quotas = append(out.Quotas, api.Quota{Quota: e.Obj.(model.Quota), UsedGPUs: used[id], BorrowedGPUs: borrowed[id]})
			}
		})
	})
	sort.Slice(out.Quotas, func(i, j int) bool { return out.Quotas[i].Scope < out.Quotas[j].Scope })
	writeJSON(w, 200, out)
}

func (s *Server) getQuota(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	scope := r.PathValue("scope")
	if !mayReadFleet(p) {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	q, ok := store.Get[model.Quota](s.st.Cache(), store.Quotas, scope)
	if !ok || !mayReadQuota(p, scope) {
		// Another team's scope answers as one that does not exist.
		s.fail(w, r, control.ErrNotFound)
		return
	}
	used, borrowed := s.quotaUse()
	writeJSON(w, 200, api.Quota{Quota: q, UsedGPUs: used[scope], BorrowedGPUs: borrowed[scope]})
}

func (s *Server) putQuota(w http.ResponseWriter, r *http.Request) {
	_, ok := s.admin(w, r)
	if !ok {
		return
	}
	var req api.QuotaRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	q := model.Quota{Scope: r.PathValue("scope"), GuaranteedGPUs: req.GuaranteedGPUs, MaxGPUs: req.MaxGPUs}
	if err := api.CheckScope("scope", q.Scope); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := q.Validate(); err != nil {
		s.fail(w, r, api.FromFieldError(err))
		return
	}
	if err := s.ctl.PutQuota(r.Context(), q); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, api.Quota{Quota: q})
}

func (s *Server) deleteQuota(w http.ResponseWriter, r *http.Request) {
	_, ok := s.admin(w, r)
	if !ok {
		return
	}
	if err := s.ctl.DeleteQuota(r.Context(), r.PathValue("scope")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
