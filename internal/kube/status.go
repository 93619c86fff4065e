package kube

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berthsched/berth/internal/sched"
)

// Status is what a replica shows of its last pass: on GET /v1/kube/status
// (the pending reasons, the alerts and pages, the free sets), on a page
// at / that draws it, and on /metrics. A replica that does not lead says
// so.
type Status struct {
	mu      sync.Mutex
	leading bool
	fence   int64
	at      time.Time
	err     string
	last    *sched.Decision
	total   int // GPUs in the fleet the last pass read

	reg       *prometheus.Registry
	largest   *prometheus.GaugeVec
	pending   prometheus.Gauge
	leader    prometheus.Gauge
	binds     prometheus.Counter
	evictions prometheus.Counter
	failures  prometheus.Counter
}

// NewStatus returns an empty status with its metrics registered.
func NewStatus() *Status {
	s := &Status{reg: prometheus.NewRegistry(),
		largest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "berth_kube_largest_placeable_gpus",
			Help: "The largest request placeable now, per topology (node, pod, any)."}, []string{"topology"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_kube_pending", Help: "Requests left unplaced by the last pass."}),
		leader:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_kube_leader", Help: "1 while this replica leads."}),
		binds:   prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_kube_binds_total", Help: "Placements decided (a gang counts once)."}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_kube_preemptions_total",
			Help: "Preemptions decided (each evicts the job's pods)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_kube_pass_errors_total", Help: "Passes that returned an error."}),
	}
	s.reg.MustRegister(s.largest, s.pending, s.leader, s.binds, s.evictions, s.failures)
	return s
}

// observe records one pass.
func (s *Status) observe(fence int64, d *sched.Decision, total int, err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leading, s.fence, s.at = true, fence, now
	if d != nil {
		s.total = total
	}
	s.leader.Set(1)
	s.err = ""
	if err != nil {
		s.err = err.Error()
		s.failures.Inc()
	}
	if d == nil {
		return
	}
	s.last = d
	l := d.Topology.LargestPlaceable
	s.largest.WithLabelValues("node").Set(float64(l.Node))
	s.largest.WithLabelValues("pod").Set(float64(l.Pod))
	s.largest.WithLabelValues("any").Set(float64(l.Any))
	s.pending.Set(float64(len(d.Pending)))
	s.binds.Add(float64(len(d.Binds)))
	s.evictions.Add(float64(len(d.Preemptions)))
}

func (s *Status) stepDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leading = false
	s.leader.Set(0)
}

// statusBody is GET /v1/kube/status.
type statusBody struct {
	Leading  bool                   `json:"leading"`
	Fence    int64                  `json:"fence,omitempty"`
	At       time.Time              `json:"at,omitzero"`
	Error    string                 `json:"error,omitempty"`
	Topology *sched.TopologySummary `json:"topology,omitempty"`
	// TotalGPUs are the fleet's GPUs (nodes with nvidia.com/gpu).
	TotalGPUs int             `json:"total_gpus"`
	Pending   []sched.Pending `json:"pending,omitempty"`
	Alerts    []sched.Alert   `json:"alerts,omitempty"`
}

// page is the fleet page: one file, no build step, embedded.
//
//go:embed ui/index.html
var page []byte

// Handler serves the page on /, /v1/kube/status and /metrics.
func (s *Status) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(page)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/kube/status", func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		b := statusBody{Leading: s.leading, Fence: s.fence, At: s.at, Error: s.err, TotalGPUs: s.total}
		if s.last != nil {
			b.Topology, b.Pending, b.Alerts = &s.last.Topology, s.last.Pending, s.last.Alerts
		}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(b)
	})
	return mux
}
