package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/server"
)

// TestSharesRunUnderMPS: two shares of one GPU in the sharing pool run as
// real processes on the same GPU, each with its MPS share; a whole-GPU job
// is never placed on a shared GPU; the topology counts the shared GPU.
func TestSharesRunUnderMPS(t *testing.T) {
	// The 8-GPU job below stands for a gang that holds (hold_min_gpus
	// is 64 by default: smaller jobs start from the churn, holding
	// nothing).
	f := newFleetWith(t, func(c *server.Config) { c.Control.Sched.HoldMinGPUs = 8 })
	n1 := f.startAgentIn("n1", "sharing", "")
	env := func(name string, milli int) api.JobRequest {
		return api.JobRequest{Name: name, GPUs: 1, GPUMilli: milli, Topology: "node"}
	}
	var jobs []string
	for _, s := range []struct {
		name  string
		milli int
	}{{"notebook", 300}, {"small-infer", 600}} {
		req := env(s.name, s.milli)
		req.Command = []string{"/bin/sh", "-c", "env; exec sleep 1000"}
		acc, err := f.api.SubmitJob(context.Background(), req, "")
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, acc.JobID)
	}
	var allocs []model.Allocation
	for _, j := range jobs {
		id := f.running(n1, j)
		for _, a := range f.job(j).Allocations {
			if a.ID == id {
				allocs = append(allocs, a)
			}
		}
	}
	if len(allocs) != 2 || allocs[0].GPUs != allocs[1].GPUs || allocs[0].GPUs.Count() != 1 {
		t.Fatalf("the two shares should pack onto one GPU: %+v", allocs)
	}
	for _, a := range allocs {
		var log string
		eventually(t, "environment of "+a.ID, func() error {
			log = readLog(t, n1, a.ID, "stdout.log")
			if !strings.Contains(log, "BERTH_GPU_MILLI=") {
				return fmt.Errorf("no env yet")
			}
			return nil
		})
		for _, want := range []string{
			fmt.Sprintf("BERTH_GPU_MILLI=%d\n", a.GPUMilli),
			fmt.Sprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d\n", a.GPUMilli/10),
			fmt.Sprintf("CUDA_VISIBLE_DEVICES=%d\n", a.GPUs.Indices()[0]),
			fmt.Sprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM\n", 80*1024*a.GPUMilli/1000),
		} {
			if !strings.Contains(log, want) {
				t.Errorf("%s lacks %q", a.ID, want)
			}
		}
	}
	// A whole-node job cannot use the shared GPU.
	whole, err := f.api.SubmitJob(context.Background(), api.JobRequest{Name: "whole", GPUs: 8, Topology: "node", Command: []string{"sleep", "600"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "whole job pending", func() error {
		j := f.job(whole.JobID)
		if j.State != model.JobPending || j.PendingReason == nil || j.PendingReason.Code == "queued" {
			return fmt.Errorf("%s %+v", j.State, j.PendingReason)
		}
		return nil
	})
	// The whole job holds the node's 7 free GPUs (R2), so a new job sees
	// none of them: only the shared GPU's 100 milli are placeable. The
	// pending reason is the pass's; the hold is in the table once the
	// pass's write lands, so the topology is read until it does.
	eventually(t, "the topology with the hold", func() error {
		top, err := f.api.Topology(context.Background())
		if err != nil {
			return err
		}
		if top.SharedGPUs != 1 || top.SharedFreeMilli != 100 || top.LargestPlaceable.Node != 0 || top.LargestShare != 100 {
			return fmt.Errorf("topology: shared %d, free milli %d, largest node %d, largest share %d", top.SharedGPUs, top.SharedFreeMilli, top.LargestPlaceable.Node, top.LargestShare)
		}
		return nil
	})
	// The last share leaving frees the GPU whole.
	for _, j := range jobs {
		f.api.CancelJob(context.Background(), j)
	}
	f.waitState(whole.JobID, model.JobRunning)
}

// TestSharesRespectTheMIGLayout: an agent whose GPUs are MIG-partitioned
// reports the layout, and the scheduler places against it: a share no
// instance holds waits with a reason that names the largest instance, and
// one that fits runs on an instance. Four 100m shares fill one GPU's four
// instances although 600 milli is left on it.
func TestSharesRespectTheMIGLayout(t *testing.T) {
	f := newFleet(t)
	f.mig = map[string]map[int][]int{"n1": {}}
	for g := range 8 {
		f.mig["n1"][g] = []int{3, 2, 1, 1} // 428m, 285m, 142m, 142m
	}
	n1 := f.startAgentIn("n1", "sharing", "")
	node, err := f.node("n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(node.MIG) != 8 || !slices.Equal(node.MIG[0], []int{428, 285, 142, 142}) {
		t.Fatalf("the node's MIG layout in the table: %v", node.MIG)
	}
	if len(node.MIGProfiles) != 8 || !slices.Equal(node.MIGProfiles[0], []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}) {
		t.Fatalf("the node's MIG profiles in the table: %v", node.MIGProfiles)
	}
	submit := func(name string, milli int) string {
		req := api.JobRequest{Name: name, GPUs: 1, GPUMilli: milli, Topology: "node", Command: []string{"/bin/sh", "-c", "env; exec sleep 1000"}}
		acc, err := f.api.SubmitJob(context.Background(), req, "")
		if err != nil {
			t.Fatal(err)
		}
		return acc.JobID
	}
	big := submit("big", 500)
	eventually(t, "the 500m share pending on the MIG layout", func() error {
		j := f.job(big)
		if j.State != model.JobPending || j.PendingReason == nil || !strings.Contains(j.PendingReason.Message, "is 428") {
			return fmt.Errorf("%s %+v", j.State, j.PendingReason)
		}
		return nil
	})
	fits := submit("fits", 400)
	id := f.running(n1, fits)
	env := ""
	eventually(t, "the 400m share's environment", func() error {
		if env = readLog(t, n1, id, "stdout.log"); !strings.Contains(env, "BERTH_MIG_INSTANCE=") {
			return fmt.Errorf("no env yet")
		}
		return nil
	})
	if !strings.Contains(env, "BERTH_MIG_INSTANCE=3g.") || !strings.Contains(env, "CUDA_VISIBLE_DEVICES=MIG-") {
		t.Fatalf("the 400m share does not run on a 3g instance:\n%s", env)
	}
	for _, a := range f.job(fits).Allocations {
		if a.ID == id && a.MIGInstance != 1 {
			t.Fatalf("the allocation records MIG instance %d, want 1 (the 3g)", a.MIGInstance)
		}
	}
	// A share that names its profile runs on an instance of exactly that
	// profile, not on the smallest free one that holds it (a 2g for 100m
	// would be the 1g's; here it asks for the 2g).
	acc, err := f.api.SubmitJob(context.Background(), api.JobRequest{Name: "prof", GPUs: 1, GPUMilli: 100, MIGProfile: "2g.20gb", Topology: "node",
		Command: []string{"/bin/sh", "-c", "env; exec sleep 1000"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	pid := f.running(n1, acc.JobID)
	eventually(t, "the 2g share's environment", func() error {
		if env = readLog(t, n1, pid, "stdout.log"); !strings.Contains(env, "BERTH_MIG_INSTANCE=") {
			return fmt.Errorf("no env yet")
		}
		return nil
	})
	if !strings.Contains(env, "BERTH_MIG_INSTANCE=2g.20gb\n") {
		t.Fatalf("the share asking for 2g.20gb runs elsewhere:\n%s", env)
	}
	top, err := f.api.Topology(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if top.LargestShare != 428 {
		t.Fatalf("largest share placeable %d, want 428 (a free 3g instance)", top.LargestShare)
	}
}
