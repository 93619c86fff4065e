package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthsched/berth/internal/api"
)

// Servers in one fleet share a table; exactly one leads and writes it.
// A follower forwards writes to the leader (its election value is its
// advertised URL) and serves reads from its own watch of the table after
// catching up to etcd's current revision, so every answer is linearizable
// whichever server gives it.

// forwardedHeader marks a request one server passed to another, so a
// request never travels twice (two servers that each believe the other
// leads answer not_leader instead of ping-ponging).
const forwardedHeader = "Berth-Forwarded-By"

// fenceHeader is the fence a write was made under; servedByHeader the
// server that made it.
const (
	fenceHeader    = "Berth-Fence"
	servedByHeader = "Berth-Served-By"
)

// writeTimeout bounds a write's wait for the table: without an etcd
// quorum it would otherwise hang.
const writeTimeout = 10 * time.Second

// leaderWrite sends a state-changing request to the leader: handled here
// when this server leads, proxied otherwise.
func (s *Server) leaderWrite(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Heartbeats are not refused: a node must stay alive, and what
		// they write (exits) is small and the reserve's to spend.
		if r.URL.Path != "/v1/agent/heartbeat" && s.refuseWhenDiskLow(w, r) {
			return
		}
		if l := s.ctl.Leading(); l || r.Header.Get(forwardedHeader) != "" {
			if wr, err := s.ctl.Writer(); err == nil {
				w.Header().Set(fenceHeader, strconv.FormatInt(wr.Fence(), 10))
			}
			w.Header().Set(servedByHeader, s.id)
			ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
			defer cancel()
			h(w, r.WithContext(ctx))
			return
		}
		leader := s.leaderHint(r)
		if leader == "" || leader == s.id || !strings.Contains(leader, "://") {
			h(w, r) // answers not_leader, or unavailable
			return
		}
		// A leader that is paused (SIGSTOP, a long GC, a hung disk)
		// accepts the connection and never answers: give up below the
		// election TTL and say so, rather than hang the caller.
		ctx, cancel := context.WithTimeout(r.Context(), s.forwardTimeout)
		defer cancel()
		s.proxy(leader).ServeHTTP(w, r.WithContext(ctx))
	}
}

func (s *Server) proxy(leader string) *httputil.ReverseProxy {
	s.proxyMu.Lock()
	defer s.proxyMu.Unlock()
	if p, ok := s.byLeader[leader]; ok {
		return p
	}
	target, _ := url.Parse(leader)
	p := &httputil.ReverseProxy{
		// Flushed as written: a forwarded log follow streams.
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, s.id)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The election still names a leader that does not answer:
			// it is gone, or paused, and its lease has not run out yet.
			// No leader hint: the one named is the one not answering.
			w.Header().Set("Retry-After", "1")
			why := "does not answer"
			if errors.Is(err, context.DeadlineExceeded) {
				why = "did not answer within " + s.forwardTimeout.String()
			}
			s.log.Warn("forwarding to the leader failed", "leader", leader, "path", r.URL.Path, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, api.ErrorBody{Error: api.Error{Code: "not_leader",
				Message: "the leader (" + leader + ") " + why + "; a new one is elected when its lease expires: retry"}})
		},
	}
	if s.byLeader == nil {
		s.byLeader = map[string]*httputil.ReverseProxy{}
	}
	s.byLeader[leader] = p
	return p
}

// consistent makes a read wait until this server's copy of the table has
// everything committed when the read arrived.
func (s *Server) consistent(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		err := s.st.Sync(ctx)
		cancel()
		if err != nil {
			s.fail(w, r, unavailable(err))
			return
		}
		h(w, r)
	}
}

// unavailable says what a table error means to the caller.
func unavailable(err error) error {
	msg := "the table (etcd) did not answer (" + err.Error() + "): is a quorum of etcd members up? Running work is unaffected; retry"
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "the table (etcd) did not answer in time: is a quorum of etcd members up? Running work is unaffected; retry"
	}
	return &api.Error{Code: "unavailable", Message: msg}
}

// proxies holds one reverse proxy per leader seen.
type proxies struct {
	proxyMu  sync.Mutex
	byLeader map[string]*httputil.ReverseProxy
}
