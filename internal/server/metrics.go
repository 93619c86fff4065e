package server

import (
	"strconv"
	"time"

	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series. Fleet gauges are computed
// at scrape time from the table and the last pass, so a pass pays nothing
// for them.
type metrics struct {
	plan, pass, apply, heartbeat *prometheus.HistogramVec
	requests                     *prometheus.HistogramVec
	applyErrors                  prometheus.Counter
	bindsDeferred                prometheus.Counter
	leader                       prometheus.Gauge
	diskFreeBytes                prometheus.Gauge
	fleet                        *fleetCollector
}

// NewMetrics registers berth's series on reg and returns the observer the
// controller reports to.
func NewMetrics(reg *prometheus.Registry) *metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 18) // 100 µs to 13 s
	m := &metrics{
		plan: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_plan_seconds",
			Help: "Time one scheduling pass (sched.Plan) takes.", Buckets: buckets}, nil),
		pass: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_pass_seconds",
			Help: "Time one control pass takes end to end: read the table, plan, apply in one fenced transaction.", Buckets: buckets}, nil),
		apply: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_apply_seconds",
			Help: "Time to persist one decision in one fenced transaction.", Buckets: buckets}, nil),
		heartbeat: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_heartbeat_seconds",
			Help: "Time from receiving a heartbeat to having its orders (table writes included).", Buckets: buckets}, nil),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_http_request_seconds",
			Help: "API request latency by route and status.", Buckets: buckets}, []string{"route", "code"}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_apply_errors_total",
			Help: "Decisions whose transaction was refused (conflict or fence)."}),
		bindsDeferred: prometheus.NewCounter(prometheus.CounterOpts{Name: "berth_binds_deferred_total",
			Help: "Binds a pass decided but left to the next pass: it had written control.max_binds_per_pass allocations."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_leader", Help: "1 while this server leads."}),
		diskFreeBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "berth_data_dir_free_bytes",
			Help: "Free space on the data dir's filesystem (embedded etcd); writes are refused below the reserve."}),
	}
	reg.MustRegister(m.plan, m.pass, m.apply, m.heartbeat, m.requests, m.applyErrors, m.bindsDeferred, m.leader, m.diskFreeBytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observe makes the fleet gauges read from a server's table and controller.
func (m *metrics) Observe(s *Server) {
	m.fleet = &fleetCollector{s: s}
	s.reg.MustRegister(m.fleet)
}

func (m *metrics) PlanDone(d time.Duration) { m.plan.WithLabelValues().Observe(d.Seconds()) }
func (m *metrics) PassDone(d time.Duration) { m.pass.WithLabelValues().Observe(d.Seconds()) }
func (m *metrics) ApplyDone(d time.Duration, err error) {
	m.apply.WithLabelValues().Observe(d.Seconds())
	if err != nil {
		m.applyErrors.Inc()
	}
}
func (m *metrics) HeartbeatLag(d time.Duration) { m.heartbeat.WithLabelValues().Observe(d.Seconds()) }
func (m *metrics) BindsDeferred(n int)          { m.bindsDeferred.Add(float64(n)) }

func (m *metrics) request(route string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
}

func (m *metrics) diskFree(b uint64) {
	if m != nil {
		m.diskFreeBytes.Set(float64(b))
	}
}

func (m *metrics) leading(on bool) {
	if m == nil {
		return
	}
	if on {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

var _ control.Observer = (*metrics)(nil)

var (
	descLargest   = prometheus.NewDesc("berth_largest_placeable_gpus", "Largest request placeable now, per topology: the headline number.", []string{"topology"}, nil)
	descGPUs      = prometheus.NewDesc("berth_gpus", "GPUs by state (free, allocated, shared, total schedulable); shared GPUs are also allocated.", []string{"state"}, nil)
	descShare     = prometheus.NewDesc("berth_share_milli", "Shares of GPUs (gpu_milli): free on shared GPUs, and the largest share placeable now.", []string{"what"}, nil)
	descFrag      = prometheus.NewDesc("berth_fragmentation_ratio", "Share of free GPUs no whole-node request can use.", nil, nil)
	descQueue     = prometheus.NewDesc("berth_queue_jobs", "Pending training jobs by size class.", []string{"size"}, nil)
	descQueueAge  = prometheus.NewDesc("berth_queue_oldest_seconds", "Age of the oldest pending job by size class.", []string{"size"}, nil)
	descRes       = prometheus.NewDesc("berth_reservations", "Reservations held by the last pass.", nil, nil)
	descPreempt   = prometheus.NewDesc("berth_preemptions_last_hour", "Training preemptions in the last hour.", nil, nil)
	descPreemptGP = prometheus.NewDesc("berth_preempted_gpus_last_hour", "GPUs preempted in the last hour (the budget's numerator).", nil, nil)
	descPages     = prometheus.NewDesc("berth_alerts_open", "Open alerts by severity.", []string{"severity"}, nil)
	descHBAge     = prometheus.NewDesc("berth_heartbeat_age_max_seconds", "Longest time since any live node's last heartbeat.", nil, nil)
	descNodes     = prometheus.NewDesc("berth_nodes", "Nodes by health.", []string{"health"}, nil)
	descTrainRun  = prometheus.NewDesc("berth_training_gpus_running", "GPUs running training now (the preemption budget's denominator).", nil, nil)
	descAlertKind = prometheus.NewDesc("berth_alerts_open_by_kind", "Open alerts by kind (starvation, inference_throttled, node_lost, ...).", []string{"kind"}, nil)
	descElastic   = prometheus.NewDesc("berth_elastic_gpus", "Elastic training running now (§9.4): the GPUs it runs at, the most it may grow to, and the least it may shrink to.", []string{"what"}, nil)
	descElasticRs = prometheus.NewDesc("berth_elastic_resizes", "Resizes (grow or shrink) of the elastic jobs in the table.", nil, nil)
	descCkptBW    = prometheus.NewDesc("berth_checkpoint_bandwidth_bytes_per_second", "Checkpoint storage bandwidth preemption deadlines are set from (R3), by source: measured from reported checkpoints, or assumed (configured, nothing measured yet); and the floor below which preemption stops.", []string{"source"}, nil)
)

// alertKinds are the kinds always reported by berth_alerts_open_by_kind.
var alertKinds = []string{"starvation", "inference_throttled", "inference_degraded_accepted", "preemption_rate", "storage_degraded", "mass_unreachable"}

type fleetCollector struct{ s *Server }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLargest, descGPUs, descShare, descFrag, descQueue, descQueueAge, descRes, descPreempt, descPreemptGP, descPages, descHBAge, descNodes, descCkptBW, descTrainRun, descAlertKind, descElastic, descElasticRs} {
		ch <- d
	}
}

func sizeClass(gpus int) string {
	switch {
	case gpus <= 1:
		return "1"
	case gpus <= 4:
		return "2-4"
	case gpus <= 8:
		return "5-8"
	case gpus <= 64:
		return "9-64"
	}
	return "65+"
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	t := s.Topology()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	g(descLargest, float64(t.LargestPlaceable.Node), "node")
	g(descLargest, float64(t.LargestPlaceable.Pod), "pod")
	g(descLargest, float64(t.LargestPlaceable.Any), "any")
	g(descGPUs, float64(t.FreeGPUs), "free")
	g(descGPUs, float64(t.AllocatedGPUs), "allocated")
	g(descGPUs, float64(t.TotalGPUs), "total")
	g(descGPUs, float64(t.SharedGPUs), "shared")
	g(descShare, float64(t.SharedFreeMilli), "free_on_shared")
	g(descShare, float64(t.LargestShare), "largest_placeable")
	g(descFrag, t.Fragmentation)
	source := "assumed"
	if t.Measured {
		source = "measured"
	}
	g(descCkptBW, t.CheckpointBandwidth, source)
	g(descCkptBW, t.CheckpointFloor, "floor")
	count, oldest := map[string]int{}, map[string]float64{}
	now := time.Now()
	health := map[string]int{}
	var hbAge float64
	training, resizes := 0, 0
	var elastic [3]int // running at, max, min
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Allocations, func(_ string, e store.Entry) {
			if a := e.Obj.(model.Allocation); a.OwnerKind != model.OwnerInference {
				training += a.GPUs.Count()
			}
		})
		v.Each(store.Jobs, func(_ string, e store.Entry) {
			j := e.Obj.(*model.Job)
			if j.Elastic != nil {
				resizes += j.Resizing().ResizeCount
				if j.State == model.JobRunning {
					elastic[0] += j.Size
					elastic[1] += j.Elastic.MaxGPUs
					elastic[2] += j.Elastic.MinGPUs
				}
			}
			if j.State != model.JobPending {
				return
			}
			k := sizeClass(j.Shape.GPUs)
			count[k]++
			oldest[k] = max(oldest[k], now.Sub(j.Queued()).Seconds())
		})
		v.Each(store.Nodes, func(id string, e store.Entry) {
			n := e.Obj.(model.Node)
			h := string(n.Health)
			if h == "" {
				h = string(model.HealthHealthy)
			}
			health[h]++
		})
	})
	for _, k := range []string{"1", "2-4", "5-8", "9-64", "65+"} {
		g(descQueue, float64(count[k]), k)
		g(descQueueAge, oldest[k], k)
	}
	for _, h := range []model.Health{model.HealthHealthy, model.HealthSuspect, model.HealthUnhealthy, model.HealthLost} {
		g(descNodes, float64(health[string(h)]), string(h))
	}
	if last := s.ctl.Last(); last != nil {
		g(descRes, float64(len(last.Decision.Reservations)))
	}
	recent, gpus := s.ctl.RecentPreemptions(now)
	g(descPreempt, float64(recent))
	g(descPreemptGP, float64(gpus))
	g(descTrainRun, float64(training))
	g(descElastic, float64(elastic[0]), "running")
	g(descElastic, float64(elastic[1]), "max")
	g(descElastic, float64(elastic[2]), "min")
	g(descElasticRs, float64(resizes))
	open, kinds := map[string]int{}, map[string]int{}
	for _, a := range s.ctl.Alerts() {
		if a.ResolvedAt == nil {
			open[string(a.Severity)]++
			kinds[a.Kind]++
		}
	}
	for _, k := range alertKinds {
		if _, ok := kinds[k]; !ok {
			kinds[k] = 0 // a series that is 0, not absent, for alert rules
		}
	}
	for k, n := range kinds {
		g(descAlertKind, float64(n), k)
	}
	for _, sev := range []string{"info", "warn", "page"} {
		g(descPages, float64(open[sev]), sev)
	}
	hbAge = s.ctl.HeartbeatAgeMax(now)
	g(descHBAge, hbAge)
}
