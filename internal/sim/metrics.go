package sim

import (
	"math"
	"sort"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// Metrics is what one policy's run reports. JSON field names are stable:
// scripts read them (documented in docs/sim.md).
type Metrics struct {
	Policy   string `json:"policy"`
	Workload string `json:"workload"`
	GPUs     int    `json:"gpus"`
	// Note says how the policy departed from its usual setup, if it did.
	Note string `json:"note,omitempty"`
	// Bound marks a relaxation row (fluid, fluid-slo, bound: bound.go),
	// not a policy. It fills only the queue-time fields, jobs_submitted
	// and simulated_hours; every other figure is left at zero.
	Bound bool `json:"bound,omitempty"`

	SimulatedHours  float64 `json:"simulated_hours"`
	WallSeconds     float64 `json:"wall_seconds"`
	Events          int     `json:"events"`
	EventsPerSecond float64 `json:"events_per_second"`
	// SpeedUp is simulated seconds per wall-clock second.
	SpeedUp float64 `json:"speed_up"`
	Passes  int     `json:"passes"`

	// AllocationPct is the time-averaged share of GPUs allocated.
	AllocationPct float64 `json:"allocation_pct"`
	// EffectivePct discounts allocation by topology penalties: a badly
	// placed TP job's GPUs count at 1/(1+penalty).
	EffectivePct float64 `json:"effective_pct"`
	// LargestPlaceable is the time average of largest_placeable.
	LargestPlaceable LargestAvg `json:"largest_placeable_avg"`
	FullyFreeNodes   float64    `json:"fully_free_nodes_avg"`
	// FragmentedGPUs: free GPUs no 8-GPU node job can use (time average).
	FragmentedGPUs float64 `json:"fragmented_gpus_avg"`

	JobsSubmitted    int `json:"jobs_submitted"`
	JobsCompleted    int `json:"jobs_completed"`
	JobsNeverStarted int `json:"jobs_never_started"`
	// QueueHours by size class (<8, 8-63, <64, 64-255, ≥256 GPUs): every
	// wait of a job, the first and each after a preemption, summed until
	// it completes; jobs not done by the end count with what they waited
	// so far.
	QueueHours map[string]Percentiles `json:"queue_hours"`
	// FirstStartQueueHours is only the wait from submit to first start.
	FirstStartQueueHours map[string]Percentiles `json:"first_start_queue_hours"`
	// CompletionHours is submit to finish, for completed jobs.
	CompletionHours Percentiles `json:"completion_hours"`
	StretchedJobs   int         `json:"stretched_jobs"`

	// CapacityWithin60sPct: demand increases fully served within the SLO.
	CapacityWithin60sPct float64 `json:"capacity_within_60s_pct"`
	DemandShedGPUHours   float64 `json:"demand_shed_gpu_hours"`
	DemandShedPct        float64 `json:"demand_shed_pct"`

	Preemptions int `json:"preemptions"`
	// PreemptionsFor splits them by beneficiary: inference, training, or
	// backfill yielding to its own reservation.
	PreemptionsFor map[string]int `json:"preemptions_for"`
	// PreemptionsByClass splits them by the preempted job's size class
	// (the classes of QueueHours): which work pays for the preemptions,
	// and so which of it a policy or a workload change (elastic jobs, say)
	// can spare.
	PreemptionsByClass map[string]int `json:"preemptions_by_class"`
	PreemptionsPerHour float64        `json:"preemptions_per_hour"`
	// LostGPUHours is what preemption cost training, in GPU-hours: the
	// checkpoint write, the restart (teardown, requeue, reload), and for a
	// job killed at its deadline the progress since its last durable
	// checkpoint. LostPct is that over the training GPU-hours run.
	LostGPUHours float64 `json:"lost_gpu_hours"`
	LostPct      float64 `json:"lost_pct"`
	// Kills are preemptions whose checkpoint missed the deadline.
	Kills int `json:"kills"`
	// Thrash counts preemptions of jobs preempted before; ThrashPct is
	// that over all preemptions.
	Thrash    int     `json:"thrash"`
	ThrashPct float64 `json:"thrash_pct"`
	// Shrinks and Grows are elastic jobs' resizes (§9.4): not counted in
	// Preemptions, but in the budget and in LostGPUHours.
	Shrinks     int `json:"shrinks"`
	Grows       int `json:"grows"`
	Relocations int `json:"relocations"`
	// RelocationGain is largest_placeable.node recovered by relocations,
	// summed over them (each: just after its old copy drained, less just
	// before), and its mean per relocation.
	RelocationGain     int     `json:"relocation_gain_node"`
	RelocationGainMean float64 `json:"relocation_gain_node_mean"`
	StarvationAlerts   int     `json:"starvation_alerts"`
	Pages              int     `json:"pages"`

	Series []Sample `json:"series"`

	// accumulators
	last                           time.Duration
	allocGPUh, effGPUh             float64
	largestSum                     [3]float64
	fullSum, fragSum               float64
	samples                        int
	demandUps, demandMet, events   int
	passes, stretched, relocations int
	shedGPUh, demandGPUh           float64
	queue, firstQueue              map[string][]float64
	trainGPUh                      float64
	kills, relocGain               int
	jct                            []float64
	starved, paged                 map[string]bool
	lost                           float64
	preemptions, thrash            int
	shrinks, grows                 int
}

// LargestAvg is largest_placeable per topology, averaged over time.
type LargestAvg struct {
	Node float64 `json:"node"`
	Pod  float64 `json:"pod"`
	Any  float64 `json:"any"`
}

// Percentiles of a distribution, in hours.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Mean  float64 `json:"mean"`
}

// Sample is one point of the time series.
type Sample struct {
	Hours          float64       `json:"hours"`
	AllocationPct  float64       `json:"allocation_pct"`
	Largest        sched.Largest `json:"largest_placeable"`
	FullyFreeNodes int           `json:"fully_free_nodes"`
	FragmentedGPUs int           `json:"fragmented_gpus"`
	PendingJobs    int           `json:"pending_jobs"`
}

// SizeClasses are the queue-time buckets, by GPUs asked. `<64` is `<8`
// and `8-63` together: the class §1's SLO speaks of. The last two split
// the jobs of 64 GPUs or more by whether the workload made them elastic
// (the same jobs under every policy, so berth-rigid and berth compare);
// reports show them only when some job was elastic.
var SizeClasses = []string{"<8", "8-63", "<64", "64-255", ">=256", ElasticClass, RigidClass}

// The classes of jobs of 64 GPUs or more, elastic or not.
const (
	ElasticClass = "64+ elastic"
	RigidClass   = "64+ rigid"
)

// jobClasses lists the buckets a job falls in.
func jobClasses(s *JobSpec) []string {
	out := sizeClasses(s.Shape.GPUs)
	switch {
	case s.Shape.GPUs < 64:
	case s.Elastic != nil:
		out = append(out, ElasticClass)
	default:
		out = append(out, RigidClass)
	}
	return out
}

// sizeClasses lists the buckets a job of gpus falls in.
func sizeClasses(gpus int) []string {
	switch {
	case gpus < 8:
		return []string{"<8", "<64"}
	case gpus < 64:
		return []string{"8-63", "<64"}
	case gpus < 256:
		return []string{"64-255"}
	}
	return []string{">=256"}
}

func newMetrics(policy string, w *Workload, nodes []model.Node) *Metrics {
	m := &Metrics{Policy: policy, Workload: w.Name, queue: map[string][]float64{}, firstQueue: map[string][]float64{}, starved: map[string]bool{}, paged: map[string]bool{},
		PreemptionsFor: map[string]int{}, PreemptionsByClass: map[string]int{}}
	for _, n := range nodes {
		m.GPUs += n.GPUs
	}
	return m
}

// advance integrates the run's state from the last event up to t.
func (m *Metrics) advance(r *run, t time.Duration) {
	dt := (t - m.last).Hours()
	m.last = t
	if dt <= 0 {
		return
	}
	m.allocGPUh += r.used * dt
	m.trainGPUh += r.trainUsed * dt
	m.effGPUh += (r.used - r.penalty) * dt
	m.demandGPUh += r.wantGPUs * dt
	m.shedGPUh += r.shortGPUs * dt
}

func (m *Metrics) sample(r *run) {
	// What a new job could get now, by the function the server reports
	// with: reserved GPUs are not free, other pools' capacity not counted.
	top := sched.Available(r.ix, r.reservations, r.lending(), false)
	p := Sample{Hours: r.now.Hours(), AllocationPct: 100 * r.used / float64(max(m.GPUs, 1)), Largest: top.LargestPlaceable,
		FullyFreeNodes: top.FreeNodesFull, FragmentedGPUs: top.FragmentedGPUs, PendingJobs: r.pending}
	m.Series = append(m.Series, p)
	m.samples++
	m.largestSum[0] += float64(p.Largest.Node)
	m.largestSum[1] += float64(p.Largest.Pod)
	m.largestSum[2] += float64(p.Largest.Any)
	m.fullSum += float64(p.FullyFreeNodes)
	m.fragSum += float64(p.FragmentedGPUs)
}

func (m *Metrics) queued(j *jobRun, wait time.Duration) {
	for _, c := range jobClasses(j.spec) {
		m.queue[c] = append(m.queue[c], wait.Hours())
	}
}

func (m *Metrics) firstQueued(j *jobRun, wait time.Duration) {
	for _, c := range jobClasses(j.spec) {
		m.firstQueue[c] = append(m.firstQueue[c], wait.Hours())
	}
}

func (m *Metrics) completed(j *jobRun, jct time.Duration) {
	m.jct = append(m.jct, jct.Hours())
	m.queued(j, j.waited)
}

func (m *Metrics) preempted(j *jobRun, p sched.Preemption, forInference bool) {
	m.preemptions++
	switch {
	case p.Backfill:
		m.PreemptionsFor["backfill"]++
	case forInference:
		m.PreemptionsFor["inference"]++
	default:
		m.PreemptionsFor["training"]++
	}
	for _, c := range jobClasses(j.spec) {
		m.PreemptionsByClass[c]++
	}
	if j.preempts > 0 {
		m.thrash++
	}
}

func (m *Metrics) alert(a sched.Alert) {
	switch {
	case a.Kind == "starvation" && a.Subject != "":
		m.starved[a.Subject] = true
	case a.Severity == sched.SeverityPage:
		m.paged[a.ID] = true
	}
}

// finish turns the accumulators into the report's figures.
func (m *Metrics) finish(r *run, wall time.Duration) {
	hours := r.now.Hours()
	m.SimulatedHours = hours
	m.WallSeconds = wall.Seconds()
	m.Events, m.Passes, m.StretchedJobs, m.Relocations = m.events, m.passes, m.stretched, m.relocations
	if wall > 0 {
		m.EventsPerSecond = float64(m.events) / wall.Seconds()
		m.SpeedUp = r.now.Seconds() / wall.Seconds()
	}
	if capacity := float64(m.GPUs) * hours; capacity > 0 {
		m.AllocationPct = 100 * m.allocGPUh / capacity
		m.EffectivePct = 100 * m.effGPUh / capacity
	}
	if m.samples > 0 {
		n := float64(m.samples)
		m.LargestPlaceable = LargestAvg{m.largestSum[0] / n, m.largestSum[1] / n, m.largestSum[2] / n}
		m.FullyFreeNodes, m.FragmentedGPUs = m.fullSum/n, m.fragSum/n
	}
	for _, i := range sortedKeys(r.jobs) {
		j := r.jobs[i]
		wait := j.waited
		if j.job.State == model.JobPending {
			wait += r.now - j.queuedSince
		}
		m.queued(j, wait)
		if !j.started {
			m.JobsNeverStarted++
			m.firstQueued(j, r.now-j.spec.Submit)
		}
	}
	m.QueueHours, m.FirstStartQueueHours = map[string]Percentiles{}, map[string]Percentiles{}
	for _, c := range SizeClasses {
		m.QueueHours[c] = percentiles(m.queue[c])
		m.FirstStartQueueHours[c] = percentiles(m.firstQueue[c])
	}
	m.JobsCompleted = len(m.jct)
	m.CompletionHours = percentiles(m.jct)
	if m.demandUps > 0 {
		m.CapacityWithin60sPct = 100 * float64(m.demandMet) / float64(m.demandUps)
	} else {
		m.CapacityWithin60sPct = 100
	}
	m.DemandShedGPUHours = round1(m.shedGPUh)
	if m.demandGPUh > 0 {
		m.DemandShedPct = 100 * m.shedGPUh / m.demandGPUh
	}
	m.Preemptions, m.Thrash, m.LostGPUHours, m.Kills = m.preemptions, m.thrash, round1(m.lost), m.kills
	m.Shrinks, m.Grows = m.shrinks, m.grows
	if m.preemptions > 0 {
		m.ThrashPct = 100 * float64(m.thrash) / float64(m.preemptions)
	}
	if m.trainGPUh > 0 {
		m.LostPct = 100 * m.lost / m.trainGPUh
	}
	if hours > 0 {
		m.PreemptionsPerHour = float64(m.preemptions) / hours
	}
	m.StarvationAlerts, m.Pages = len(m.starved), len(m.paged)
	m.RelocationGain = m.relocGain
	if m.relocations > 0 {
		m.RelocationGainMean = float64(m.relocGain) / float64(m.relocations)
	}
}

// PercentilesOf is nearest-rank percentiles of xs (hours), rounded to
// hundredths: the one definition every report of queue time uses.
func PercentilesOf(xs []float64) Percentiles { return percentiles(xs) }

func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	at := func(q float64) float64 { return round2(nearestRank(s, q)) }
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Percentiles{Count: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99), Mean: round2(sum / float64(len(s)))}
}

// nearestRank is the q-quantile of sorted, by nearest rank.
func nearestRank(sorted []float64, q float64) float64 {
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }
func round2(x float64) float64 { return math.Round(x*100) / 100 }
