package agent

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// TestElasticJobShrinksForInferenceAndGrowsBack: a 8-16 GPU elastic job on
// two real agents starts at 16; an inference deployment that needs a node
// shrinks it to 8 (one worker checkpoints and exits, the other is told
// the new size and carries on); when the deployment goes, the job grows
// back to 16 onto the freed node. It is never requeued.
func TestElasticJobShrinksForInferenceAndGrowsBack(t *testing.T) {
	f := newFleet(t)
	n1, n2 := f.startAgent("el-1", ""), f.startAgent("el-2", "")
	agents := []*runningAgent{n1, n2}
	job := f.submit(api.JobRequest{Name: "elastic", GPUs: 16, Topology: "pod", Elastic: &model.Elastic{MinGPUs: 8, MaxGPUs: 16},
		Checkpoint: &api.CheckpointRequest{Path: t.TempDir(), Bytes: 1 << 20}},
		"train", "-elastic", "-steps", "1000000", "-step-time", "20ms")
	logOf := func(alloc string) string {
		for _, ra := range agents {
			if l := readLog(t, ra, alloc, "stdout.log"); l != "" {
				return l
			}
		}
		return ""
	}
	live := func(j api.Job) []model.Allocation {
		var out []model.Allocation
		for _, a := range j.Allocations {
			if !a.Stopping {
				out = append(out, a)
			}
		}
		return out
	}
	var first []model.Allocation
	eventually(t, "the job running at 16 on both nodes", func() error {
		j := f.job(job)
		first = live(j)
		if j.State != model.JobRunning || j.Size != 16 || len(first) != 2 {
			return fmt.Errorf("state %s size %d allocations %d", j.State, j.Size, len(first))
		}
		for _, a := range first {
			if !strings.Contains(logOf(a.ID), "elastic: running at 16 GPUs") {
				return fmt.Errorf("%s log: %q", a.ID, logOf(a.ID))
			}
		}
		return nil
	})

	one := 1
	dep := api.DeploymentRequest{Name: "chat", Model: "m", Team: "t", MinReplicas: 1, MaxReplicas: 1, Desired: &one,
		ReplicaShape: api.ReplicaShape{GPUs: 8, Topology: "node"},
		Command:      []string{os.Args[0]}, Env: map[string]string{"BERTH_TEST_WORKLOAD": "serve"}}
	if err := f.api.Do(context.Background(), "POST", "/v1/deployments", dep, nil); err != nil {
		t.Fatal(err)
	}
	var kept model.Allocation
	eventually(t, "the job shrunk to 8, its other worker told so", func() error {
		j := f.job(job)
		if j.State != model.JobRunning || j.Size != 8 || len(j.Allocations) != 1 {
			return fmt.Errorf("state %s size %d allocations %+v", j.State, j.Size, j.Allocations)
		}
		kept = j.Allocations[0]
		if l := logOf(kept.ID); !strings.Contains(l, "resized: 16 to 8 GPUs") {
			return fmt.Errorf("survivor %s log has no resize: %q", kept.ID, tail(l))
		}
		return nil
	})
	for _, a := range first {
		if a.ID != kept.ID && !strings.Contains(logOf(a.ID), "SIGTERM: checkpointed") {
			t.Errorf("the dropped worker %s did not checkpoint on its way out: %q", a.ID, tail(logOf(a.ID)))
		}
	}

	if err := f.api.Do(context.Background(), "DELETE", "/v1/deployments/chat", nil, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job grown back to 16", func() error {
		j := f.job(job)
		l := live(j)
		if j.State != model.JobRunning || j.Size != 16 || len(l) != 2 {
			return fmt.Errorf("state %s size %d allocations %d; %s", j.State, j.Size, len(l), f.why(j))
		}
		if s := logOf(kept.ID); !strings.Contains(s, "resized: 8 to 16 GPUs") {
			return fmt.Errorf("survivor log has no growth: %q", tail(s))
		}
		for _, a := range l {
			if a.ID != kept.ID && !strings.Contains(logOf(a.ID), "elastic: running at 16 GPUs") {
				return fmt.Errorf("new worker %s log: %q", a.ID, tail(logOf(a.ID)))
			}
		}
		return nil
	})
	j := f.job(job)
	if slices.ContainsFunc(j.History, func(e model.Event) bool { return e.Event == "requeued" }) {
		t.Fatalf("an elastic job was requeued instead of resized: %v", j.History)
	}
	var whys []string
	for _, r := range j.Resizing().Resizes {
		whys = append(whys, fmt.Sprintf("%d->%d %s", r.From, r.To, strings.Fields(r.Why)[0]))
	}
	if got := strings.Join(whys, ", "); got != "16->8 shrink, 8->16 grow" {
		t.Fatalf("resize history %q", got)
	}
	f.api.CancelJob(t.Context(), job)
}

func tail(s string) string {
	if len(s) > 400 {
		return "…" + s[len(s)-400:]
	}
	return s
}

// why is what the table and the last pass say about a job: its last
// events, every allocation, and the pass's binds, preemptions and pending
// entries, for a failure to explain itself.
func (f *fleet) why(j api.Job) string {
	var b strings.Builder
	h := j.History
	if len(h) > 6 {
		h = h[len(h)-6:]
	}
	fmt.Fprintf(&b, "events %v", h)
	f.mu.Lock()
	in := f.in
	f.mu.Unlock()
	if in == nil {
		return b.String()
	}
	in.Store.Cache().Read(func(v store.View) {
		v.Each(store.Allocations, func(id string, e store.Entry) {
			a := e.Obj.(model.Allocation)
			fmt.Fprintf(&b, "; alloc %s %s/%s on %s stopping=%v", id, a.OwnerKind, a.OwnerID, a.NodeID, a.Stopping)
		})
	})
	if last := in.Controller.Last(); last != nil {
		d := last.Decision
		fmt.Fprintf(&b, "; last pass at %s: binds %+v preemptions %+v pending %+v relocations %+v", last.At.Format("15:04:05.000"), d.Binds, d.Preemptions, d.Pending, d.Relocations)
	}
	return b.String()
}

// TestElasticNodeJobShrinksAndGrowsOnItsNode: a 2-8 GPU `node` job on one
// real agent starts at 8 as two workers of its one node (its minimum and
// its growth, each an allocation with its own GPUs); a replica that needs
// 4 of those GPUs shrinks it to 2 (the growth worker checkpoints and
// exits, the other is told), and when the replica goes the job grows back
// to 8 on the same node. A shrink gives back whole allocations, so the
// job gives up its 6-GPU growth for the replica's 4 and grows again into
// the 2 the replica leaves.
func TestElasticNodeJobShrinksAndGrowsOnItsNode(t *testing.T) {
	f := newFleet(t)
	ra := f.startAgent("eln-1", "")
	job := f.submit(api.JobRequest{Name: "elastic-node", GPUs: 8, Topology: "node", Elastic: &model.Elastic{MinGPUs: 2, MaxGPUs: 8},
		Checkpoint: &api.CheckpointRequest{Path: t.TempDir(), Bytes: 1 << 20}},
		"train", "-elastic", "-steps", "1000000", "-step-time", "20ms")
	logOf := func(alloc string) string { return readLog(t, ra, alloc, "stdout.log") }
	live := func(j api.Job) []model.Allocation {
		var out []model.Allocation
		for _, a := range j.Allocations {
			if !a.Stopping {
				out = append(out, a)
			}
		}
		return out
	}
	var first []model.Allocation
	eventually(t, "the job running at 8 as two workers of one node", func() error {
		j := f.job(job)
		first = live(j)
		if j.State != model.JobRunning || j.Size != 8 || len(first) != 2 {
			return fmt.Errorf("state %s size %d allocations %+v; %s", j.State, j.Size, first, f.why(j))
		}
		if first[0].GPUs&first[1].GPUs != 0 || first[0].GPUs.Count()+first[1].GPUs.Count() != 8 {
			return fmt.Errorf("the workers' GPUs overlap or miss some: %s and %s", first[0].GPUs, first[1].GPUs)
		}
		for _, a := range first {
			if !strings.Contains(logOf(a.ID), "elastic: running at 8 GPUs") {
				return fmt.Errorf("%s log: %q", a.ID, tail(logOf(a.ID)))
			}
		}
		return nil
	})
	min := first[0]
	if min.GPUs.Count() != 2 {
		min = first[1]
	}

	one := 1
	dep := api.DeploymentRequest{Name: "chat", Model: "m", Team: "t", MinReplicas: 1, MaxReplicas: 1, Desired: &one,
		ReplicaShape: api.ReplicaShape{GPUs: 4, Topology: "node"},
		Command:      []string{os.Args[0]}, Env: map[string]string{"BERTH_TEST_WORKLOAD": "serve"}}
	if err := f.api.Do(context.Background(), "POST", "/v1/deployments", dep, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job shrunk to 2 for the replica, then at 4 beside it", func() error {
		j := f.job(job)
		l := live(j)
		if !hasHistory(j, "shrinking", "8 to 2 GPUs for chat") {
			return fmt.Errorf("no shrink in the history; %s", f.why(j))
		}
		if j.State != model.JobRunning || j.Size != 4 || len(l) != 2 || !slices.ContainsFunc(l, func(a model.Allocation) bool { return a.ID == min.ID }) {
			return fmt.Errorf("state %s size %d allocations %+v; %s", j.State, j.Size, l, f.why(j))
		}
		if s := logOf(min.ID); !strings.Contains(s, "resized: 8 to 2 GPUs") || !strings.Contains(s, "resized: 2 to 4 GPUs") {
			return fmt.Errorf("survivor %s log has not both resizes: %q", min.ID, tail(s))
		}
		return nil
	})
	for _, a := range first {
		if a.ID != min.ID && !strings.Contains(logOf(a.ID), "SIGTERM: checkpointed") {
			t.Errorf("the growth worker %s did not checkpoint on its way out: %q", a.ID, tail(logOf(a.ID)))
		}
	}

	if err := f.api.Do(context.Background(), "DELETE", "/v1/deployments/chat", nil, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job grown back to 8 on its node", func() error {
		j := f.job(job)
		l := live(j)
		if j.State != model.JobRunning || j.Size != 8 || len(l) != 3 {
			return fmt.Errorf("state %s size %d allocations %+v; %s", j.State, j.Size, l, f.why(j))
		}
		if s := logOf(min.ID); !strings.Contains(s, "resized: 4 to 8 GPUs") {
			return fmt.Errorf("survivor log has no growth: %q", tail(s))
		}
		return nil
	})
	f.api.CancelJob(t.Context(), job)
}

func hasHistory(j api.Job, event, detail string) bool {
	return slices.ContainsFunc(j.History, func(e model.Event) bool { return e.Event == event && strings.Contains(e.Detail, detail) })
}
