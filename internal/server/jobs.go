package server

import (
	"net/http"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if p.Kind != RoleAdmin && p.Kind != RoleTeam {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	var req api.JobRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if p.Kind == RoleTeam {
		// The token says which org and team the job counts against: a
		// team cannot escape its quota by naming another.
		org, team := p.Team()
		if req.Team != "" && req.Team != team || req.Org != "" && req.Org != org {
			s.fail(w, r, forbidden(p, "team:"+req.Org+"/"+req.Team))
			return
		}
		req.Org, req.Team = org, team
	}
	if err := s.ctl.Bound(model.Shape{GPUs: req.GPUs, Topology: model.Topology(req.Topology)}, "gpus"); err != nil {
		s.fail(w, r, err)
		return
	}
	now := time.Now()
	j, err := req.Job(newJobID(now))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 256 {
		s.fail(w, r, api.Invalid("Idempotency-Key", "at most 256 characters"))
		return
	}
	job, created, err := s.ctl.SubmitJob(r.Context(), j, p.Role(), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	acc := api.JobAccepted{JobID: job.ID, State: job.State, Created: created}
	acc.QueuePosition, acc.ETA = s.queuePosition(job)
	writeJSON(w, http.StatusAccepted, acc)
}

// queuePosition ranks a pending job among the pending jobs by base
// priority then submit time (the core's order without aging, which the
// last pass's effective priorities refine in GET /v1/jobs/{id}); its ETA
// is now when its shape is placeable now, the reservation's when it holds
// one, else unknown.
func (s *Server) queuePosition(j model.Job) (int, *time.Time) {
	if j.State != model.JobPending {
		return 0, nil
	}
	pos := 1
	var res *sched.Reservation
	last := s.ctl.Last()
	if last != nil {
		if p, ok := last.Pending[j.ID]; ok && p.Priority != nil {
			for _, o := range last.Decision.Pending {
				if o.Kind != model.OwnerInference && o.OwnerID != j.ID && o.Priority != nil && o.Priority.Effective > p.Priority.Effective {
					pos++
				}
			}
			res = last.Reservations[j.ID]
			if res != nil && !res.ETA.IsZero() {
				t := res.ETA
				return pos, &t
			}
			return pos, nil
		}
	}
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Jobs, func(_ string, e store.Entry) {
			o := e.Obj.(model.Job)
			if o.State == model.JobPending && o.ID != j.ID &&
				(o.Priority > j.Priority || o.Priority == j.Priority && o.SubmittedAt.Before(j.SubmittedAt)) {
				pos++
			}
		})
	})
	if last != nil && largestFor(last.Decision.Topology.LargestPlaceable, j.Shape.Topology) >= j.Shape.GPUs {
		t := time.Now().UTC()
		return pos, &t
	}
	return pos, nil
}

func largestFor(l sched.Largest, t model.Topology) int {
	switch t {
	case model.TopologyNode:
		return l.Node
	case model.TopologyPod:
		return l.Pod
	}
	return l.Any
}

func newJobID(now time.Time) string {
	_, id := newSecret()
	return "j-" + now.UTC().Format("0102-150405") + "-" + id[2:]
}

// mayRead reports whether p may see a job of an org and team.
func mayRead(p *Principal, org, team string) bool {
	if p.Kind == RoleAdmin {
		return true
	}
	o, t := p.Team()
	return p.Kind == RoleTeam && o == org && t == team
}

func (s *Server) jobView(j model.Job) api.Job {
	v := api.Job{Job: j}
	s.st.Cache().Read(func(view store.View) { v.Allocations = view.AllocationsOf(j.ID) })
	if j.State == model.JobPending {
		if last := s.ctl.Last(); last != nil {
			if p, ok := last.Pending[j.ID]; ok {
				v.PendingReason = reasonView(&p.Reason)
				if p.Priority != nil {
					pr := api.Priority(*p.Priority)
					v.EffectivePrio = &pr
				}
			}
			if res, ok := last.Reservations[j.ID]; ok {
				rv := &api.ReservationView{At: res.At, GPUs: res.GPUs, Waits: res.Waits, Backfill: res.Backfill}
				for _, h := range res.Held {
					rv.HeldGPUs += h.GPUs.Count()
				}
				if !res.ETA.IsZero() {
					t := res.ETA
					rv.ETA, v.ETA = &t, &t
				}
				v.Reservation = rv
			}
		}
		v.QueuePosition, _ = s.queuePosition(j)
		if v.PendingReason == nil {
			v.PendingReason = &api.Reason{Code: "queued", Message: "waiting for the next scheduling pass"}
		}
	}
	return v
}

func reasonView(r *sched.Reason) *api.Reason {
	return &api.Reason{Code: string(r.Code), Constraint: r.Constraint, Message: r.Message, BestGPUs: r.BestGPUs, BestAt: r.BestAt}
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if p.Kind != RoleAdmin && p.Kind != RoleTeam {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	team, state := r.URL.Query().Get("team"), r.URL.Query().Get("state")
	org := ""
	if p.Kind == RoleTeam {
		o, t := p.Team()
		if team != "" && team != t {
			s.fail(w, r, forbidden(p, "team:"+team))
			return
		}
		org, team = o, t
	}
	if state != "" {
		switch model.JobState(state) {
		case model.JobPending, model.JobRunning, model.JobCompleted, model.JobFailed, model.JobCancelled:
		default:
			s.fail(w, r, api.Invalid("state", "%q: expected pending, running, completed, failed or cancelled", state))
			return
		}
	}
	var jobs []model.Job
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Jobs, func(_ string, e store.Entry) {
			j := e.Obj.(model.Job)
			if (team == "" || j.Team == team) && (org == "" || j.Org == org) && (state == "" || string(j.State) == state) {
				jobs = append(jobs, j)
			}
		})
	})
	sort.Slice(jobs, func(a, b int) bool {
		if !jobs[a].SubmittedAt.Equal(jobs[b].SubmittedAt) {
			return jobs[a].SubmittedAt.Before(jobs[b].SubmittedAt)
		}
		return jobs[a].ID < jobs[b].ID
	})
	out := api.JobList{Jobs: make([]api.Job, 0, len(jobs))}
	for _, j := range jobs {
		v := api.Job{Job: j}
		if j.State == model.JobRunning {
			s.st.Cache().Read(func(view store.View) { v.Allocations = view.AllocationsOf(j.ID) })
		}
		if j.State == model.JobPending {
			if last := s.ctl.Last(); last != nil {
				if p, ok := last.Pending[j.ID]; ok {
					v.PendingReason = reasonView(&p.Reason)
				}
			}
		}
		v.History = nil // the list stays small; GET /v1/jobs/{id} has it
		out.Jobs = append(out.Jobs, v)
	}
	writeJSON(w, 200, out)
}

// ownedJob loads a job the principal may see, or answers for it.
func (s *Server) ownedJob(w http.ResponseWriter, r *http.Request) (model.Job, bool) {
	p := principal(r.Context())
	id := r.PathValue("id")
	j, ok := store.Get[model.Job](s.st.Cache(), store.Jobs, id)
	switch {
	case p.Kind != RoleAdmin && p.Kind != RoleTeam:
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
	case !ok, !mayRead(p, j.Org, j.Team):
		// Another team's job answers as one that does not exist: a 403
		// would confirm the id.
		s.fail(w, r, control.ErrNotFound)
	default:
		return j, true
	}
	return model.Job{}, false
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	if j, ok := s.ownedJob(w, r); ok {
		writeJSON(w, 200, s.jobView(j))
	}
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	j, ok := s.ownedJob(w, r)
	if !ok {
		return
	}
	out, err := s.ctl.CancelJob(r.Context(), j.ID, principal(r.Context()).String())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, s.jobView(out))
}
