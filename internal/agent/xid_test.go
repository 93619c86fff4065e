package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// TestXIDClasses drives each class of §8's table through a fake GPU and
// checks what the control plane did within a heartbeat or two.
func TestXIDClasses(t *testing.T) {
	f := newFleet(t)
	f.startAgent("n1", "")
	n2 := f.startAgent("n2", "")
	long := func(name string, gpus int) string {
		return f.submit(api.JobRequest{Name: name, GPUs: gpus, Preemptible: true,
			Checkpoint: &api.CheckpointRequest{Path: t.TempDir(), Bytes: 1 << 20}}, "train", "-steps", "100000", "-step-time", "50ms")
	}
	where := func(job string) (*runningAgent, model.Allocation) {
		t.Helper()
		var a model.Allocation
		eventually(t, job+" bound", func() error {
			j := f.job(job)
			if j.State != model.JobRunning || len(j.Allocations) == 0 {
				return fmt.Errorf("%s", j.State)
			}
			a = j.Allocations[0]
			return nil
		})
		ra := f.agents[a.NodeID]
		f.running(ra, job)
		return ra, a
	}
	inject := func(ra *runningAgent, in gpu.Injection) {
		t.Helper()
		if err := gpu.Inject(ra.inject, in); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("application XID 13 tells the job, quarantines nothing", func(t *testing.T) {
		j := long("app-error", 2)
		ra, a := where(j)
		g := a.GPUs.Indices()[0]
		inject(ra, gpu.Injection{GPU: g, XID: 13, Message: "graphics engine exception"})
		eventually(t, "job told", func() error {
			for _, e := range f.job(j).History {
				if e.Event == "gpu_error" && strings.Contains(e.Detail, "XID 13") {
					return nil
				}
			}
			return fmt.Errorf("no gpu_error in history")
		})
		if !strings.Contains(readLog(t, ra, a.ID, "stderr.log"), "XID 13 on GPU") {
			t.Errorf("the job's log does not carry the XID")
		}
		n, _ := f.node(ra.cfg.NodeID)
		if n.Quarantined || n.QuarantinedGPUs != 0 {
			t.Fatalf("application XID quarantined: %+v", n.Node)
		}
		if jj := f.job(j); jj.State != model.JobRunning || jj.Allocations[0].ID != a.ID {
			t.Fatalf("application XID moved the job: %s %v", jj.State, jj.Allocations)
		}
		f.api.CancelJob(t.Context(), j)
	})

	t.Run("XID 48 quarantines the GPU and moves the work off it", func(t *testing.T) {
		j := long("ecc-victim", 8)
		ra, a := where(j)
		inject(ra, gpu.Injection{GPU: 5, XID: 48, Message: "double-bit ECC"})
		eventually(t, "GPU 5 quarantined", func() error {
			n, _ := f.node(ra.cfg.NodeID)
			if !n.QuarantinedGPUs.Has(5) || n.Quarantined {
				return fmt.Errorf("node %+v", n.Node)
			}
			return nil
		})
		eventually(t, "job moved to a healthy 8-GPU node", func() error {
			jj := f.job(j)
			if jj.State != model.JobRunning || len(jj.Allocations) == 0 || jj.Allocations[0].ID == a.ID {
				return fmt.Errorf("%s %v", jj.State, jj.Allocations)
			}
			if jj.Allocations[0].NodeID == ra.cfg.NodeID {
				return fmt.Errorf("placed back on the node with a quarantined GPU: %v", jj.Allocations[0])
			}
			return nil
		})
		// A small job may use the node, never GPU 5.
		small := long("small", 7)
		_, sa := where(small)
		if sa.NodeID != ra.cfg.NodeID || sa.GPUs.Has(5) {
			t.Fatalf("7-GPU job on %s %s: want the other 7 GPUs of %s", sa.NodeID, sa.GPUs, ra.cfg.NodeID)
		}
		f.api.CancelJob(t.Context(), j)
		f.api.CancelJob(t.Context(), small)
		f.api.Do(t.Context(), "POST", "/v1/nodes/"+ra.cfg.NodeID+"/unquarantine", nil, nil)
	})

	t.Run("XID 79 quarantines the node", func(t *testing.T) {
		j := long("off-the-bus", 4)
		ra, a := where(j)
		inject(ra, gpu.Injection{GPU: a.GPUs.Indices()[0], XID: 79, Message: "fallen off the bus"})
		eventually(t, "node quarantined and job moved", func() error {
			n, _ := f.node(ra.cfg.NodeID)
			jj := f.job(j)
			if !n.Quarantined {
				return fmt.Errorf("node not quarantined")
			}
			if len(jj.Allocations) == 0 || jj.Allocations[0].NodeID == ra.cfg.NodeID || jj.State != model.JobRunning {
				return fmt.Errorf("job %s %v", jj.State, jj.Allocations)
			}
			return nil
		})
		f.api.CancelJob(t.Context(), j)
		f.api.Do(t.Context(), "POST", "/v1/nodes/"+ra.cfg.NodeID+"/unquarantine", nil, nil)
	})

	t.Run("NVML failing makes every GPU unhealthy", func(t *testing.T) {
		inject(n2, gpu.Injection{Kind: "nvml"})
		eventually(t, "node unhealthy", func() error {
			n, _ := f.node("n2")
			if !n.Quarantined || n.Health != model.HealthUnhealthy {
				return fmt.Errorf("node %s quarantined=%v", n.Health, n.Quarantined)
			}
			return nil
		})
		j := long("after-nvml", 8)
		if _, a := where(j); a.NodeID != "n1" {
			t.Fatalf("placed on %s with NVML failing", a.NodeID)
		}
	})
}
