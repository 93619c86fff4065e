package server

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
)

// AlertList is GET /v1/alerts.
type AlertList struct {
	Alerts []control.AlertRecord `json:"alerts"`
}

func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request) {
	_, ok := s.admin(w, r)
	if !ok {
		return
	}
	out := AlertList{Alerts: s.ctl.Alerts()}
	if out.Alerts == nil {
		out.Alerts = []control.AlertRecord{}
	}
	sort.Slice(out.Alerts, func(i, j int) bool {
		a, b := out.Alerts[i], out.Alerts[j]
		if (a.ResolvedAt == nil) != (b.ResolvedAt == nil) {
			return a.ResolvedAt == nil
		}
		return a.RaisedAt.After(b.RaisedAt)
	})
	writeJSON(w, 200, out)
}

func (s *Server) getAlert(w http.ResponseWriter, r *http.Request) {
	_, ok := s.admin(w, r)
	if !ok {
		return
	}
	a, ok := s.ctl.Alert(r.PathValue("id"))
	if !ok {
		s.fail(w, r, control.ErrNotFound)
		return
	}
	writeJSON(w, 200, a)
}

func (s *Server) alertAction(w http.ResponseWriter, r *http.Request) {
	p, ok := s.admin(w, r)
	if !ok {
		return
	}
	rec, err := s.ctl.Act(r.Context(), r.PathValue("id"), r.PathValue("action"), p.String())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, rec)
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	_, ok := s.admin(w, r)
	if !ok {
		return
	}
	var req api.TokenRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.CreateToken(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.admin(w, r); ok {
		writeJSON(w, 200, api.TokenList{Tokens: s.Tokens()})
	}
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.admin(w, r); !ok {
		return
	}
	t, err := s.RevokeToken(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, 200, t)
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	var hb api.Heartbeat
	if err := decode(w, r, &hb); err != nil {
		s.fail(w, r, err)
		return
	}
	if p.Kind != RoleAdmin && !(p.Kind == RoleAgent && p.Scope == hb.NodeID) {
		s.fail(w, r, forbidden(p, "agent:"+hb.NodeID))
		return
	}
	if err := api.ValidateHeartbeat(&hb); err != nil {
		s.fail(w, r, err)
		return
	}
	orders, err := s.ctl.Heartbeat(r.Context(), hb)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	orders.Servers = s.candidates(r.Context())
	// Compact: agents read it, not people, and at 2,500 heartbeats a
	// second indenting it was a twentieth of the server's CPU.
	writeCompact(w, 200, orders)
}

// candidates is the servers campaigning, read from etcd at most every
// few seconds: it changes when a server joins or leaves, and every
// heartbeat carries it.
func (s *Server) candidates(ctx context.Context) []string {
	s.candMu.Lock()
	cand, stale, gen := s.cand, time.Since(s.candAt) > 5*time.Second && !s.candBusy, s.candGen
	if stale {
		s.candBusy = true // one heartbeat refreshes; the others answer with the last list
	}
	s.candMu.Unlock()
	if !stale {
		return cand
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	c, err := s.st.Candidates(cctx)
	cancel()
	s.candMu.Lock()
	defer s.candMu.Unlock()
	s.candBusy = false
	if err == nil {
		s.cand, s.candAt = c, time.Now()
		if s.candGen != gen {
			s.candAt = time.Time{} // changed while read: read again
		}
	}
	return s.cand
}

// watchCandidates makes the next heartbeat reread the candidates whenever
// a server joins or leaves the election, rather than up to five seconds
// later: until then an agent told of one server knows no other.
func (s *Server) watchCandidates(ctx context.Context) {
	for range s.st.CandidatesChanged(ctx) {
		s.candMu.Lock()
		s.candGen++
		s.candAt = time.Time{}
		s.candMu.Unlock()
	}
}
