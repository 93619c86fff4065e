package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves the API over one store and controller.
type Server struct {
	st      *store.Store
	ctl     *control.Controller
	log     *slog.Logger
	audit   *slog.Logger
	id      string
	addr    string
	reg     *prometheus.Registry
	metrics *metrics
	mux     *http.ServeMux
	// forwardTimeout bounds a write forwarded to the leader.
	forwardTimeout time.Duration
	disk           *diskGuard // nil with an external etcd
	// cand caches the servers campaigning (candidates).
	candMu   sync.Mutex
	cand     []string
	candAt   time.Time
	candBusy bool
	candGen  uint64 // bumped by watchCandidates on every change
	// principals caches decoded tokens by hash (see authenticate).
	principals sync.Map
	logs       *logHub
	proxies
}

// Options wires a Server.
type Options struct {
	// ID names this server in the election; its advertised address is a
	// good choice.
	ID string
	// Addr is the address clients reach this server at, for leader hints.
	Addr   string
	Logger *slog.Logger
	// Audit receives one entry per state-changing request; default Logger.
	Audit *slog.Logger
	// ForwardTimeout bounds a write forwarded to the leader; it must be
	// below the election TTL, so a paused leader is answered for (503,
	// Retry-After) before its successor is even elected. Default 5 s.
	ForwardTimeout time.Duration
	// DataDir is the embedded etcd's directory, whose free space the disk
	// guard watches (disk.go); empty with an external etcd. MinFreeDisk
	// is the reserve, DefaultMinFreeDisk when 0.
	DataDir     string
	MinFreeDisk uint64
}

// New builds the server. Its controller must have been made with
// Metrics from NewObserver (or none).
func New(st *store.Store, ctl *control.Controller, reg *prometheus.Registry, m *metrics, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Audit == nil {
		o.Audit = o.Logger
	}
	if o.ForwardTimeout <= 0 {
		o.ForwardTimeout = 5 * time.Second
	}
	s := &Server{st: st, ctl: ctl, log: o.Logger, audit: o.Audit, id: o.ID, addr: o.Addr, reg: reg, metrics: m, mux: http.NewServeMux(), logs: newLogHub(),
		forwardTimeout: o.ForwardTimeout}
	if o.DataDir != "" {
		if o.MinFreeDisk == 0 {
			o.MinFreeDisk = DefaultMinFreeDisk
		}
		s.disk = &diskGuard{dir: o.DataDir, reserve: o.MinFreeDisk}
	}
	s.routes()
	return s
}

// Handler is the whole HTTP surface. What no route matches (404, or 405
// for a path whose method is wrong) gets the same JSON error body as
// every other failure, not the mux's plain text.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := s.mux.Handler(r); pattern != "" {
			s.mux.ServeHTTP(w, r)
			return
		}
		rec := &headerOnly{h: http.Header{}}
		s.mux.ServeHTTP(rec, r) // learns the status and Allow header only
		body := api.Error{Code: "not_found", Message: "no such endpoint: " + r.Method + " " + api.Escape(r.URL.Path) + " (GET /v1/openapi.json lists them)"}
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.h.Get("Allow"))
			body = api.Error{Code: "method_not_allowed", Message: r.Method + " is not allowed on " + api.Escape(r.URL.Path) + "; allowed: " + rec.h.Get("Allow")}
		} else if rec.status != http.StatusNotFound {
			// A redirect (a path cleaned, a trailing slash): the mux's
			// own answer is right.
			s.mux.ServeHTTP(w, r)
			return
		}
		writeJSON(w, rec.status, api.ErrorBody{Error: body})
	})
}

// headerOnly records what the mux would answer, discarding its body.
type headerOnly struct {
	h      http.Header
	status int
}

func (w *headerOnly) Header() http.Header { return w.h }
func (w *headerOnly) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return len(b), nil
}
func (w *headerOnly) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (s *Server) routes() {
	pub := func(pattern string, h http.HandlerFunc) { s.mux.Handle(pattern, s.instrument(pattern, h)) }
	// Reads catch up with the table first and writes go to the leader
	// first, so the token check sees the tokens as the table has them.
	auth := func(pattern string, h http.HandlerFunc) {
		if strings.HasPrefix(pattern, "GET ") {
			h = s.consistent(s.authed(h))
		} else {
			h = s.leaderWrite(s.authed(h))
		}
		s.mux.Handle(pattern, s.instrument(pattern, h))
	}
	pub("GET /healthz", s.healthz)
	pub("GET /readyz", s.readyz)
	pub("GET /v1/openapi.json", s.openapi)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	auth("GET /v1/leader", s.leader)
	pub("GET /{$}", s.index)
	s.mux.Handle("GET /ui/", s.uiHandler())
	auth("GET /v1/dashboard", s.dashboard)

	auth("POST /v1/jobs", s.submitJob)
	auth("GET /v1/jobs", s.listJobs)
	auth("GET /v1/jobs/{id}", s.getJob)
	auth("DELETE /v1/jobs/{id}", s.cancelJob)

	auth("POST /v1/deployments", s.createDeployment)
	auth("GET /v1/deployments", s.listDeployments)
	auth("GET /v1/deployments/{id}", s.getDeployment)
	auth("PATCH /v1/deployments/{id}", s.scaleDeployment)
	auth("DELETE /v1/deployments/{id}", s.deleteDeployment)

	auth("GET /v1/cluster/topology", s.topology)
	auth("GET /v1/nodes", s.listNodes)
	auth("GET /v1/nodes/{id}", s.getNode)
	auth("POST /v1/nodes/{id}/{action}", s.nodeAction)

	auth("GET /v1/quotas", s.listQuotas)
	auth("GET /v1/quotas/{scope...}", s.getQuota)
	auth("PUT /v1/quotas/{scope...}", s.putQuota)
	auth("DELETE /v1/quotas/{scope...}", s.deleteQuota)

	auth("GET /v1/usage", s.usage)
	auth("GET /v1/history", s.history)

	auth("GET /v1/alerts", s.listAlerts)
	auth("GET /v1/alerts/{id}", s.getAlert)
	auth("POST /v1/alerts/{id}/actions/{action}", s.alertAction)

	auth("POST /v1/tokens", s.createToken)
	auth("GET /v1/tokens", s.listTokens)
	auth("DELETE /v1/tokens/{id}", s.revokeToken)
	auth("POST /v1/agent/heartbeat", s.heartbeat)

	// Log reads stream, and the agents' log polls are held open: neither
	// goes through the writes' forwarding, which has a timeout (logs.go).
	streamed := func(pattern string, h http.HandlerFunc) {
		s.mux.Handle(pattern, s.instrument(pattern, s.consistent(s.authed(h))))
	}
	streamed("GET /v1/jobs/{id}/logs", s.jobLogs)
	streamed("GET /v1/deployments/{id}/logs", s.deploymentLogs)
	direct := func(pattern string, h http.HandlerFunc) { s.mux.Handle(pattern, s.instrument(pattern, s.authed(h))) }
	direct("POST /v1/agent/logs/poll", s.logPoll)
	direct("POST /v1/agent/logs/reply", s.logReply)
	// Profiles take seconds (a CPU profile's own duration): direct, like
	// the log polls, and not held back by a consistent read.
	direct("GET /debug/pprof/{name}", s.profile)
	direct("GET /debug/pprof/{$}", s.profile)
}

// authed resolves the token: 401 without a valid one.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, why := s.authenticate(r)
		if p == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
			s.fail(w, r, &api.Error{Code: "unauthorized", Message: why})
			return
		}
		if slot, ok := r.Context().Value(slotKey{}).(**Principal); ok {
			*slot = p // for the audit entry instrument writes
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// slotKey carries where authed records the principal, so that the
// audit entry written outside it can say who.
type slotKey struct{}

// statusWriter remembers the status for metrics and the audit log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) instrument(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: 200}
		var who *Principal
		h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), slotKey{}, &who)))
		if s.metrics != nil {
			s.metrics.request(pattern, sw.status, time.Since(t0))
		}
		if r.Method != http.MethodGet && pattern != "POST /v1/agent/heartbeat" {
			by := "anonymous"
			if who != nil {
				by = who.String()
			}
			s.audit.Info("audit", "who", by, "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"result", result(sw.status), "remote", r.RemoteAddr)
		}
	})
}

func result(status int) string {
	switch {
	case status < 400:
		return "ok"
	case status == 401 || status == 403:
		return "refused"
	case status < 500:
		return "rejected"
	}
	return "error"
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]string{"status": "ok"})
}

// readyz is ready when this server leads or a leader exists to follow.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if e := s.diskLow(); e != nil {
		writeJSON(w, 503, map[string]any{"ready": false, "reason": e.Message, "code": e.Code, "reads": true})
		return
	}
	if s.ctl.Leading() {
		writeJSON(w, 200, map[string]any{"ready": true, "role": "leader"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	leader, _, err := s.st.Leader(ctx)
	if err != nil || leader == "" {
		msg := "no leader elected"
		if err != nil {
			msg = err.Error()
		}
		writeJSON(w, 503, map[string]any{"ready": false, "reason": msg})
		return
	}
	writeJSON(w, 200, map[string]any{"ready": true, "role": "follower", "leader": leader})
}

func (s *Server) leader(w http.ResponseWriter, r *http.Request) {
	leader, fence, err := s.st.Leader(r.Context())
	if err != nil {
		s.fail(w, r, &api.Error{Code: "unavailable", Message: "etcd: " + err.Error()})
		return
	}
	writeJSON(w, 200, api.Leader{Leader: leader, Fence: fence, Self: s.id, IsSelf: leader == s.id && s.ctl.Leading()})
}

func (s *Server) leaderHint(r *http.Request) string {
	l, _ := s.askLeader(r)
	return l
}

// askLeader asks etcd who leads, waiting at most a second.
func (s *Server) askLeader(r *http.Request) (string, error) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	l, _, err := s.st.Leader(ctx)
	return l, err
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(api.OpenAPI)
}

// Lead campaigns for leadership and runs the control loop while leading,
// campaigning again after a loss, until ctx ends. onBootstrap receives
// the first admin token if this leader created it.
func (s *Server) Lead(ctx context.Context, ttl time.Duration, onBootstrap func(secret string)) error {
	for ctx.Err() == nil {
		l, err := s.st.Campaign(ctx, s.id, ttl)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Warn("campaign failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		s.metrics.leading(true)
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.ctl.Lead(lctx, l) }()
		// Bootstrap once the writer is installed.
		for i := 0; i < 100 && !s.ctl.Leading(); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		// The first admin token must not be lost to a transient etcd
		// error (a raft election under way): retry while etcd is busy.
		for attempt := 0; ; attempt++ {
			secret, err := s.bootstrap(ctx)
			if err == nil {
				if secret != "" && onBootstrap != nil {
					onBootstrap(secret)
				}
				break
			}
			if !store.Unavailable(err) || attempt == 50 || ctx.Err() != nil {
				s.log.Error("bootstrap token", "err", err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		err = <-done
		cancel()
		s.metrics.leading(false)
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		l.Resign(rctx)
		rcancel()
		if err != nil && !errors.Is(err, control.ErrLostLeadership) {
			return err
		}
		if err != nil {
			s.log.Warn("lost leadership; campaigning again")
		}
	}
	return nil
}
