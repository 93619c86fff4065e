package peer

import (
	"math"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sim"
)

// Classes are the queue-time size classes the comparison reports (the
// simulator's, less those the live fleet is too small for).
var Classes = []string{"<8", "8-63", "<64"}

// Summary is one column of the comparison. Hours are simulated.
type Summary struct {
	System string `json:"system"`
	// Queue is every wait of a job (first and after each preemption)
	// until it completes or the replay ends, by size class.
	Queue map[string]sim.Percentiles `json:"queue_hours"`
	// LargestNode, LargestPod: largest_placeable averaged over polls.
	LargestNode float64 `json:"largest_placeable_node_avg"`
	LargestPod  float64 `json:"largest_placeable_pod_avg"`
	FreeNodes   float64 `json:"fully_free_nodes_avg"`
	// AllocationPct: GPUs allocated over polls.
	AllocationPct float64 `json:"allocation_pct"`
	// Spanning: jobs that asked for one node (topology node) whose run
	// spread over more than one.
	Spanning int `json:"spanning_jobs"`
	// Preemptions of training jobs, and the GPU-hours they cost: for each
	// preempted job that completed, what its runs held beyond its work
	// (the progress since its last checkpoint, the restart, the reload).
	Preemptions  int     `json:"preemptions"`
	LostGPUHours float64 `json:"lost_gpu_hours"`
	// ReplicasShortPct: replica-hours short of demand over replica-hours
	// demanded, all services.
	ReplicasShortPct float64 `json:"replicas_short_pct"`
	Submitted        int     `json:"jobs_submitted"`
	Completed        int     `json:"jobs_completed"`
	NeverStarted     int     `json:"jobs_never_started"`
	Refused          int     `json:"errors"`
	// SlowestPoll is the longest poll of the system, in real seconds: the
	// harness's own resolution (zero for the simulator).
	SlowestPoll float64 `json:"slowest_poll_s"`
	Series      []Point `json:"series,omitempty"`
	queue       map[string][]float64
}

// Summarise reduces a run to its column.
func Summarise(r *Run) *Summary {
	s := &Summary{System: r.System, Queue: map[string]sim.Percentiles{}, queue: map[string][]float64{}, Refused: r.Errors, Series: r.Series,
		SlowestPoll: r.PollLagMax.Seconds()}
	for _, rec := range r.Jobs {
		j := rec.Spec
		s.Submitted++
		if rec.refused {
			s.NeverStarted++
			continue // refused: no wait to count (the errors row shows it)
		}
		for _, c := range classesOf(j.Shape.GPUs) {
			s.queue[c] = append(s.queue[c], rec.Waited.Hours())
		}
		if len(rec.Runs) == 0 {
			s.NeverStarted++
		}
		if rec.State == Done {
			s.Completed++
		}
		s.Preemptions += rec.Preemptions
		var held time.Duration
		for _, sp := range rec.Runs {
			held += sp.End - sp.Start
			if j.Shape.Topology == model.TopologyNode && len(sp.Nodes) > 1 {
				s.Spanning++
			}
		}
		if rec.State == Done && rec.Preemptions > 0 && held > j.Work {
			s.LostGPUHours += float64(j.Shape.GPUs) * (held - j.Work).Hours()
		}
	}
	for c, xs := range s.queue {
		s.Queue[c] = sim.PercentilesOf(xs)
	}
	if n := len(r.Series); n > 0 {
		for _, p := range r.Series {
			s.LargestNode += float64(p.Largest.Node)
			s.LargestPod += float64(p.Largest.Pod)
			s.FreeNodes += float64(p.FreeNodes)
			s.AllocationPct += 100 * float64(p.AllocatedGPUs) / float64(max(r.GPUs, 1))
		}
		s.LargestNode /= float64(n)
		s.LargestPod /= float64(n)
		s.FreeNodes /= float64(n)
		s.AllocationPct /= float64(n)
	}
	if r.DemandReplicaSeconds > 0 {
		s.ReplicasShortPct = 100 * r.ShortReplicaSeconds / r.DemandReplicaSeconds
	}
	return s
}

// FromSim is the simulator's column for the same workload, from its own
// metrics: the same definitions where the simulator has them (its
// demand shed is in GPU-hours, not replica-hours; its stretched jobs are
// the node jobs spread over nodes).
func FromSim(m *sim.Metrics) *Summary {
	s := &Summary{System: "berth sim", Queue: map[string]sim.Percentiles{}, LargestNode: m.LargestPlaceable.Node, LargestPod: m.LargestPlaceable.Pod,
		FreeNodes: m.FullyFreeNodes, AllocationPct: m.AllocationPct, Spanning: m.StretchedJobs, Preemptions: m.Preemptions,
		LostGPUHours: m.LostGPUHours, ReplicasShortPct: m.DemandShedPct, Submitted: m.JobsSubmitted, Completed: m.JobsCompleted,
		NeverStarted: m.JobsNeverStarted}
	for _, c := range Classes {
		if p, ok := m.QueueHours[c]; ok {
			s.Queue[c] = p
		}
	}
	for _, p := range m.Series {
		s.Series = append(s.Series, Point{Hours: p.Hours, Largest: p.Largest, FreeNodes: p.FullyFreeNodes,
			AllocatedGPUs: int(math.Round(p.AllocationPct * float64(m.GPUs) / 100)), Pending: p.PendingJobs})
	}
	return s
}

func classesOf(gpus int) []string {
	switch {
	case gpus < 8:
		return []string{"<8", "<64"}
	case gpus < 64:
		return []string{"8-63", "<64"}
	}
	return nil
}
