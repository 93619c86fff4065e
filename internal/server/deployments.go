package server

import (
	"net/http"
	"sort"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

func (s *Server) deploymentView(d model.Deployment) api.Deployment {
	v := api.Deployment{Deployment: d, Target: d.Target()}
	replicas, stopping := map[int]bool{}, map[int]bool{}
	// A replica's copies by creation: one copy normally, two while it is
	// relocated (make before break). It serves if some copy is all ready.
	type copyKey struct {
		replica int
		at      int64
	}
	copies := map[copyKey]bool{}
	s.st.Cache().Read(func(view store.View) {
		for _, a := range view.AllocationsOf(d.ID) {
			if a.Stopping {
				stopping[a.Replica] = true
				continue
			}
			replicas[a.Replica] = true
			k := copyKey{a.Replica, a.CreatedAt.UnixNano()}
			if ready, seen := copies[k]; !seen || ready {
				copies[k] = s.ctl.Ready(a.ID)
			}
		}
	})
	serving := map[int]bool{}
	for k, ready := range copies {
		if ready {
			serving[k.replica] = true
		}
	}
	v.Actual, v.Stopping, v.Ready = len(replicas), len(stopping), len(serving)
	v.Standby = max(0, v.Actual-v.Target)
	if last := s.ctl.Last(); last != nil {
		if p := last.Pending(d.ID); p != nil && v.Actual < v.Target {
			v.Pending = reasonView(p.Reason)
			v.Pending.Message = s.inferenceReason(d.ID, p.Reason)
		}
	}
	return v
}

// mayDeploy: admin and the owning team manage; the deployment's
// autoscaler reads and scales it: the deployment its token was made for
// (the same uid), not a later one of the same name.
func mayDeploy(p *Principal, d model.Deployment, scale bool) bool {
	switch p.Kind {
	case RoleAdmin:
		return true
	case RoleTeam:
		return sameTeam(p.Scope, d.Team)
	case RoleAutoscaler:
		return p.Scope == d.ID && p.DeploymentUID == d.UID && scale
	}
	return false
}

// sameTeam compares team scopes, "team" being "default/team".
func sameTeam(a, b string) bool {
	ao, at := splitTeam(a)
	bo, bt := splitTeam(b)
	return a != "" && b != "" && ao == bo && at == bt
}

func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if p.Kind != RoleAdmin && p.Kind != RoleTeam {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	var req api.DeploymentRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if p.Kind == RoleTeam {
		if req.Team != "" && !sameTeam(req.Team, p.Scope) {
			s.fail(w, r, forbidden(p, "team:"+req.Team))
			return
		}
		req.Team = p.Scope
	}
	rs := req.ReplicaShape
	if err := s.ctl.Bound(model.Shape{GPUs: rs.GPUs, Topology: model.Topology(rs.Topology)}, "replica_shape.gpus"); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := req.Deployment()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_, uid := newSecret()
	d.UID = "d-" + uid[2:]
	out, err := s.ctl.CreateDeployment(r.Context(), d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"deployment_id": out.ID, "deployment": s.deploymentView(out)})
}

func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	var deps []model.Deployment
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Deployments, func(_ string, e store.Entry) {
			if d := e.Obj.(model.Deployment); mayDeploy(p, d, true) {
				deps = append(deps, d)
			}
		})
	})
	sort.Slice(deps, func(i, j int) bool { return deps[i].ID < deps[j].ID })
	out := api.DeploymentList{Deployments: []api.Deployment{}}
	for _, d := range deps {
		out.Deployments = append(out.Deployments, s.deploymentView(d))
	}
	writeJSON(w, 200, out)
}

// ownedDeployment loads a deployment the principal may act on.
func (s *Server) ownedDeployment(w http.ResponseWriter, r *http.Request, scale bool) (model.Deployment, bool) {
	p := principal(r.Context())
	d, ok := store.Get[model.Deployment](s.st.Cache(), store.Deployments, r.PathValue("id"))
	switch {
	case !ok || !mayDeploy(p, d, true):
		// Another team's deployment answers as one that does not
		// exist: a 403 would confirm the name is taken.
		s.fail(w, r, control.ErrNotFound)
	case !mayDeploy(p, d, scale):
		s.fail(w, r, forbidden(p, "team:"+d.Team))
	default:
		return d, true
	}
	return model.Deployment{}, false
}

func (s *Server) getDeployment(w http.ResponseWriter, r *http.Request) {
	if d, ok := s.ownedDeployment(w, r, true); ok {
		writeJSON(w, 200, s.deploymentView(d))
	}
}

func (s *Server) scaleDeployment(w http.ResponseWriter, r *http.Request) {
	d, ok := s.ownedDeployment(w, r, true)
	if !ok {
		return
	}
	var req api.ScaleRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := req.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.ctl.ScaleDeployment(r.Context(), d.ID, *req.Desired)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, s.deploymentView(out))
}

func (s *Server) deleteDeployment(w http.ResponseWriter, r *http.Request) {
	d, ok := s.ownedDeployment(w, r, false)
	if !ok {
		return
	}
	if err := s.ctl.DeleteDeployment(r.Context(), d.ID); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
