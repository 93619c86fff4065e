package agent

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/server"
)

// slowStorage assumes 1 GB/s of checkpoint storage and stops preemption
// below 0.2 GB/s; the deadline floor is low enough that the bandwidth,
// not the floor, sets it.
func slowStorage(c *server.Config) {
	c.Control.Sched.Storage.Bandwidth = 1e9
	c.Control.Sched.Storage.MinBandwidth = 0.2e9
	c.Control.Sched.Storage.MinDeadline = time.Second
}

// measured waits until the topology reports a measured checkpoint
// bandwidth within 25% of want, and returns it.
func measured(t *testing.T, f *fleet, want float64) api.Topology {
	t.Helper()
	var top api.Topology
	eventually(t, fmt.Sprintf("checkpoint bandwidth measured near %.2f GB/s", want/1e9), func() error {
		var err error
		top, err = f.api.Topology(context.Background())
		if err != nil {
			return err
		}
		if !top.Measured || top.CheckpointBandwidth < 0.75*want || top.CheckpointBandwidth > 1.25*want {
			return fmt.Errorf("%.3f GB/s (measured %v)", top.CheckpointBandwidth/1e9, top.Measured)
		}
		return nil
	})
	return top
}

// TestSlowCheckpointsLengthenDeadlines (R3): a workload reports each
// checkpoint's bytes and seconds; the control loop measures the storage
// from them, and the next preemption's deadline is bytes / measured
// bandwidth × 3, not what the configured bandwidth would give. The job
// checkpoints within it and resumes.
func TestSlowCheckpointsLengthenDeadlines(t *testing.T) {
	f := newFleetWith(t, slowStorage)
	n1 := f.startAgent("n1", "")
	ck := t.TempDir()
	// 2 GB at 0.5 GB/s: 4 s a checkpoint, one every 20 steps.
	low := f.submit(api.JobRequest{Name: "low", GPUs: 8, Preemptible: true, Checkpoint: &api.CheckpointRequest{Path: ck, Bytes: 2e9}},
		"train", "-steps", "50", "-step-time", "20ms", "-checkpoint-every", "20", "-checkpoint-bytes", "2000000000", "-checkpoint-bandwidth", "500000000")
	f.running(n1, low)
	top := measured(t, f, 0.5e9)
	if top.CheckpointFloor != 0.2e9 {
		t.Errorf("floor %.2f GB/s, want the configured 0.2", top.CheckpointFloor/1e9)
	}
	high := f.submit(api.JobRequest{Name: "high", GPUs: 8, Priority: 100}, "train", "-steps", "3", "-step-time", "20ms")
	var deadline time.Duration
	eventually(t, "low preempted", func() error {
		for _, a := range f.job(low).Allocations {
			if a.Stopping && !a.StopAt.IsZero() {
				deadline = a.StopDeadline.Sub(a.StopAt)
				return nil
			}
		}
		return fmt.Errorf("not stopping")
	})
	// Assumed 1 GB/s would give 2 GB / 1 GB/s × 3 = 6 s; measured at
	// about 0.5 GB/s it is about 12 s.
	if deadline < 9*time.Second || deadline > 16*time.Second {
		t.Fatalf("preemption deadline %s: want about 12 s (2 GB / 0.5 GB/s × 3), the configured bandwidth would give 6 s", deadline)
	}
	f.waitState(high, "completed")
	j := f.waitState(low, "completed")
	if j.PreemptCount != 1 {
		t.Errorf("preempt_count %d, want 1", j.PreemptCount)
	}
	for _, e := range j.History {
		if strings.Contains(e.Detail, "killed") {
			t.Errorf("the checkpoint (4 s) fit its %s deadline, but: %s %s", deadline, e.Event, e.Detail)
		}
	}
}

// TestStorageBelowTheFloorStopsPreemption (R3's guard): checkpoints
// reported at 0.1 GB/s, below the 0.2 GB/s floor: berth pages and
// preempts nothing, since a preemption that cannot checkpoint is a kill.
// A job that leaves its checkpoint size out gets the measured one. And
// the idle inference node is not lent (R1 lends it only because it can
// take it back): a preemptible job waits and says so, and the topology
// does not count that node for new training.
func TestStorageBelowTheFloorStopsPreemption(t *testing.T) {
	f := newFleetWith(t, func(c *server.Config) {
		slowStorage(c)
		c.Control.Sched.Pools = sched.Pools{Training: "training", Inference: "inference", BorrowInference: true}
	})
	n1 := f.startAgentIn("n1", "training", "")
	f.startAgentIn("n2", "inference", "")
	ck := t.TempDir()
	// 0.4 GB at 0.1 GB/s: 4 s a checkpoint. No size declared.
	low := f.submit(api.JobRequest{Name: "low", GPUs: 8, Preemptible: true, Checkpoint: &api.CheckpointRequest{Path: ck}},
		"train", "-steps", "2000", "-step-time", "20ms", "-checkpoint-every", "5", "-checkpoint-bytes", "400000000", "-checkpoint-bandwidth", "100000000")
	f.running(n1, low)
	measured(t, f, 0.1e9)
	eventually(t, "the measured size on the job", func() error {
		if c := f.job(low).Checkpoint; c == nil || c.MeasuredBytes != 4e8 {
			return fmt.Errorf("checkpoint %+v", c)
		}
		return nil
	})
	high := f.submit(api.JobRequest{Name: "high", GPUs: 8, Priority: 100}, "train", "-steps", "3", "-step-time", "20ms")
	eventually(t, "a storage page, high pending on it", func() error {
		var list server.AlertList
		if err := f.api.Do(context.Background(), http.MethodGet, "/v1/alerts", nil, &list); err != nil {
			return err
		}
		paged := false
		for _, a := range list.Alerts {
			paged = paged || (a.Kind == "storage_degraded" && a.Severity == "page" && a.ResolvedAt == nil)
		}
		if !paged {
			return fmt.Errorf("alerts %+v", alertKinds(list.Alerts))
		}
		if r := f.job(high).PendingReason; r == nil || !strings.Contains(r.Message, "checkpoint storage bandwidth") {
			return fmt.Errorf("high's reason %+v", r)
		}
		return nil
	})
	borrower := f.submit(api.JobRequest{Name: "borrower", GPUs: 8, Preemptible: true, Checkpoint: &api.CheckpointRequest{Path: t.TempDir()}}, "train", "-steps", "3", "-step-time", "20ms")
	eventually(t, "borrower pending, the inference node not lent", func() error {
		if r := f.job(borrower).PendingReason; r == nil || !strings.Contains(r.Message, "the inference pool is not lent") {
			return fmt.Errorf("borrower's reason %+v", r)
		}
		top, err := f.api.Topology(context.Background())
		if err != nil {
			return err
		}
		if top.LargestPlaceable.Node != 0 || top.FreeGPUs != 8 {
			return fmt.Errorf("largest_placeable %+v with %d GPUs free: want node 0, the free inference node not counted", top.LargestPlaceable, top.FreeGPUs)
		}
		return nil
	})
	// And it stays so: low keeps its GPUs.
	time.Sleep(2 * time.Second)
	for _, a := range f.job(low).Allocations {
		if a.Stopping {
			t.Fatalf("low was preempted below the storage floor: %+v", a)
		}
	}
	if s := f.job(high).State; s != "pending" {
		t.Fatalf("high is %s, want pending behind the storage guard", s)
	}
	if s := f.job(borrower).State; s != "pending" {
		t.Fatalf("borrower is %s, want pending: the inference pool is not lent below the storage floor", s)
	}
}

func alertKinds(as []control.AlertRecord) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Kind+"/"+string(a.Severity))
	}
	return out
}

// TestOneTeamCannotStopPreemption: a team's workload reports its
// checkpoints at 0.1 GB/s, below the 0.2 GB/s floor (slow storage of its
// own making, or a lie to keep its jobs from being preempted), while
// another team's report 0.5 GB/s. Each team is measured alone and the
// storage is as fast as the faster of the two (the upper median of the
// teams that reported recently): no page, and
// a preemption still goes ahead. (A team that is the only one to report
// sets the figure alone: with one witness, berth cannot tell a lie from
// slow storage.)
func TestOneTeamCannotStopPreemption(t *testing.T) {
	f := newFleetWith(t, slowStorage)
	f.startAgent("n1", "")
	f.startAgent("n2", "")
	ck := t.TempDir()
	good := f.submit(api.JobRequest{Name: "good", Team: "good", GPUs: 8, Preemptible: true, Checkpoint: &api.CheckpointRequest{Path: ck + "/good", Bytes: 2e9}},
		"train", "-steps", "2000", "-step-time", "20ms", "-checkpoint-every", "20", "-checkpoint-bytes", "2000000000", "-checkpoint-bandwidth", "500000000")
	f.waitState(good, "running")
	measured(t, f, 0.5e9)
	evil := f.submit(api.JobRequest{Name: "evil", Team: "evil", GPUs: 8, Preemptible: true, Checkpoint: &api.CheckpointRequest{Path: ck + "/evil"}},
		"train", "-steps", "2000", "-step-time", "20ms", "-checkpoint-every", "5", "-checkpoint-bytes", "400000000", "-checkpoint-bandwidth", "100000000")
	eventually(t, "evil's slow report taken", func() error {
		if c := f.job(evil).Checkpoint; c == nil || c.MeasuredBytes != 4e8 {
			return fmt.Errorf("checkpoint %+v", c)
		}
		return nil
	})
	if top := measured(t, f, 0.5e9); top.CheckpointBandwidth < top.CheckpointFloor {
		t.Fatalf("measured %.2f GB/s, below the floor", top.CheckpointBandwidth/1e9)
	}
	high := f.submit(api.JobRequest{Name: "high", GPUs: 8, Priority: 100}, "train", "-steps", "3", "-step-time", "20ms")
	f.waitState(high, "completed")
	var list server.AlertList
	if err := f.api.Do(context.Background(), http.MethodGet, "/v1/alerts", nil, &list); err != nil {
		t.Fatal(err)
	}
	for _, a := range list.Alerts {
		if a.Kind == "storage_degraded" {
			t.Fatalf("one team's slow reports paged storage_degraded: %+v", a)
		}
	}
}
