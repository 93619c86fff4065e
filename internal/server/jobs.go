package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
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
	acc.QueuePosition, acc.ETA = s.queuePosition(job, true)
	writeJSON(w, http.StatusAccepted, acc)
}

// queuePosition is a pending job's place in the queue: where the last
// pass ranked it (the core's order: SLO tier, effective priority with
// aging, submit time), or, for a job no pass has seen yet (fresh: just
// submitted), one after the pending jobs ahead of it by base priority and
// submit time, from the table's queue index. Its ETA is the
// reservation's when it holds one, now when its shape is placeable now,
// else unknown.
func (s *Server) queuePosition(j model.Job, fresh bool) (int, *time.Time) {
	if j.State != model.JobPending {
		return 0, nil
	}
	last := s.ctl.Last()
	// A job just submitted is in no pass yet.
	if last != nil && !fresh {
		if pos, ok := last.Position(j.ID); ok {
			if res := last.Reservations[j.ID]; res != nil && !res.ETA.IsZero() {
				t := res.ETA
				return pos, &t
			}
			return pos, nil
		}
	}
	pos := 1
	s.st.Cache().Read(func(v store.View) { pos += v.PendingAhead(j.Priority, j.SubmittedAt, j.ID) })
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

// newJobID is "j-", the submit's month, day and second (UTC), and 8
// random bytes. Four bytes, as before, met in about one of every four
// runs of a million submits at 2,000 a second (a birthday collision
// among the second's ids), and the second submit was refused with 409
// "already exists"; at 64 bits that is once in billions of such runs.
func newJobID(now time.Time) string {
	var b [8]byte
	rand.Read(b[:])
	return "j-" + now.UTC().Format("0102-150405") + "-" + hex.EncodeToString(b[:])
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
			if p := last.Pending(j.ID); p != nil {
				v.PendingReason = reasonView(p.Reason)
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
		v.QueuePosition, _ = s.queuePosition(j, false)
		if v.PendingReason == nil {
			v.PendingReason = &api.Reason{Code: "queued", Message: "waiting for the next scheduling pass"}
		}
	}
	return v
}

func reasonView(r *sched.Reason) *api.Reason {
	return &api.Reason{Code: string(r.Code), Constraint: r.Constraint, Message: r.Message, BestGPUs: r.BestGPUs, BestAt: r.BestAt}
}

// Page sizes of GET /v1/jobs: a list without limit gets the default, and
// no page is larger than the maximum, so one request cannot make the
// server encode the whole table.
const (
	defaultJobPage = 500
	maxJobPage     = 5000
)

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if p.Kind != RoleAdmin && p.Kind != RoleTeam {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	q := r.URL.Query()
	f := store.JobFilter{Team: q.Get("team"), Name: q.Get("name")}
	if p.Kind == RoleTeam {
		o, t := p.Team()
		if f.Team != "" && f.Team != t {
			s.fail(w, r, forbidden(p, "team:"+f.Team))
			return
		}
		f.Org, f.Team = o, t
	}
	if st := q.Get("state"); st != "" {
		for _, one := range strings.Split(st, ",") {
			switch model.JobState(one) {
			case model.JobPending, model.JobRunning, model.JobCompleted, model.JobFailed, model.JobCancelled:
				f.States = append(f.States, model.JobState(one))
			default:
				s.fail(w, r, api.Invalid("state", "%q: expected pending, running, completed, failed or cancelled, or several of them separated by commas", one))
				return
			}
		}
	}
	switch k := q.Get("kind"); k {
	case "", store.JobKindShare, store.JobKindWhole:
		f.Kind = k
	default:
		s.fail(w, r, api.Invalid("kind", "%q: expected whole (jobs on whole GPUs) or share (jobs on a share of one GPU)", k))
		return
	}
	limit := defaultJobPage
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxJobPage {
			s.fail(w, r, api.Invalid("limit", "%q: expected a whole number from 1 to %d", l, maxJobPage))
			return
		}
		limit = n
	}
	var after *store.JobCursor
	if c := q.Get("continue"); c != "" {
		cur, err := parseCursor(c)
		if err != nil {
			s.fail(w, r, api.Invalid("continue", "%q: not a token this server gave (%v); start again without continue", c, err))
			return
		}
		after = &cur
	}
	jobs := make([]model.Job, 0, min(limit, 64))
	more := false
	s.st.Cache().Read(func(v store.View) {
		v.JobsAfter(after, f, func(j model.Job) bool {
			if len(jobs) == limit {
				more = true
				return false
			}
			jobs = append(jobs, j)
			return true
		})
	})
	out := api.JobList{Jobs: make([]api.Job, 0, len(jobs))}
	if more {
		last := jobs[len(jobs)-1]
		out.Continue = cursorToken(store.JobCursor{At: last.SubmittedAt, ID: last.ID})
	}
	snap := s.ctl.Last()
	s.st.Cache().Read(func(view store.View) {
		for _, j := range jobs {
			v := api.Job{Job: j}
			if j.State == model.JobRunning {
				v.Allocations = view.AllocationsOf(j.ID)
			}
			if j.State == model.JobPending && snap != nil {
				if p := snap.Pending(j.ID); p != nil {
					v.PendingReason = reasonView(p.Reason)
				}
			}
			v.History = nil // the list stays small; GET /v1/jobs/{id} has it
			out.Jobs = append(out.Jobs, v)
		}
	})
	writeCompact(w, 200, out)
}

// cursorToken and parseCursor are the continue token: the last listed
// job's submit time and id, opaque to clients. Jobs submitted after a
// list began appear on its later pages (they sort last); none is listed
// twice.
func cursorToken(c store.JobCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.At.UnixNano(), 10) + "/" + c.ID))
}

func parseCursor(tok string) (store.JobCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return store.JobCursor{}, err
	}
	at, id, ok := strings.Cut(string(b), "/")
	ns, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return store.JobCursor{}, errors.New("malformed")
	}
	return store.JobCursor{At: time.Unix(0, ns), ID: id}, nil
}

// ownedJob loads a job the principal may see, or answers for it.
func (s *Server) ownedJob(w http.ResponseWriter, r *http.Request) (model.Job, bool) {
	p := principal(r.Context())
	id := r.PathValue("id")
	j, ok := store.Get[model.Job](s.st.Cache(), store.Jobs, id)
	switch {
	case !mayReadFleet(p):
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
	if j, ok := compactedJob(s.st.Cache(), r.PathValue("id")); ok {
		// Finished past the retention: what is left is its usage record.
		if p := principal(r.Context()); mayReadFleet(p) && mayRead(p, j.Org, j.Team) {
			writeJSON(w, 200, api.Job{Job: j, Compacted: true})
			return
		}
	}
	if j, ok := s.ownedJob(w, r); ok {
		writeJSON(w, 200, s.jobView(j))
	}
}

// compactedJob is a job no longer in the table, as its usage record
// keeps it: who, what size, when, how it ended, its wait and GPU time.
func compactedJob(c *store.Cache, id string) (model.Job, bool) {
	var j model.Job
	ok := false
	c.Read(func(v store.View) {
		if _, live := v.Get(store.Jobs, id); live {
			return
		}
		u, found := v.UsageOf(id)
		if !found || u.Kind != model.OwnerTraining {
			return
		}
		ok = true
		j = model.Job{ID: u.ID, Name: u.Name, Org: u.Org, Team: u.Team, User: u.User, State: u.State, SubmittedAt: u.Start,
			FinishedAt: u.End, RunRecord: &model.RunRecord{GPUSeconds: u.GPUSeconds, WaitSeconds: u.WaitSeconds}, PreemptCount: u.Preemptions}
		j.Shape.GPUs = int(u.GPUs)
		if u.GPUs < 1 {
			j.Shape.GPUs, j.Shape.GPUMilli = 1, int(u.GPUs*1000+0.5)
		}
	})
	return j, ok
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
