package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/workload"
)

var stepLine = regexp.MustCompile(`(?m)^step (\d+)/`)

// steps lists the step numbers a training log printed.
func steps(log string) []int {
	var out []int
	for _, m := range stepLine.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// TestPreemptedTrainingResumes: a higher-priority gang preempts a running
// preemptible job; it checkpoints on SIGTERM, exits on its own, is
// requeued, and resumes from its checkpoint without redoing or skipping a
// step.
func TestPreemptedTrainingResumes(t *testing.T) {
	f := newFleet(t)
	n1 := f.startAgent("n1", "")
	ck := t.TempDir()
	low := f.submit(api.JobRequest{Name: "low", GPUs: 8, Preemptible: true,
		Checkpoint: &api.CheckpointRequest{Path: ck, Bytes: 1 << 20}}, "train", "-steps", "80", "-step-time", "40ms")
	first := f.running(n1, low)
	eventually(t, "some steps done", func() error {
		if s := steps(readLog(t, n1, first, "stdout.log")); len(s) < 5 {
			return fmt.Errorf("%d steps", len(s))
		}
		return nil
	})
	high := f.submit(api.JobRequest{Name: "high", GPUs: 8, Priority: 100}, "train", "-steps", "3", "-step-time", "40ms")
	f.waitState(high, model.JobCompleted)
	j := f.waitState(low, model.JobCompleted)
	if j.PreemptCount != 1 {
		t.Errorf("preempt_count %d, want 1; history %v", j.PreemptCount, j.History)
	}
	var allocs []string
	for _, e := range j.History {
		if e.Event == "bound" || e.Event == "allocation_gone" {
			t.Logf("%s %s", e.Event, e.Detail)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(n1.stateDir, "allocs"))
	for _, e := range ents {
		if strings.Contains(readLog(t, n1, e.Name(), "stdout.log"), "of 80") || strings.Contains(readLog(t, n1, e.Name(), "stdout.log"), "resumed") {
			allocs = append(allocs, e.Name())
		}
	}
	if len(allocs) != 2 {
		t.Fatalf("want the low job's two runs, found %v", allocs)
	}
	one, two := readLog(t, n1, first, "stdout.log"), ""
	for _, a := range allocs {
		if a != first {
			two = readLog(t, n1, a, "stdout.log")
		}
	}
	m := regexp.MustCompile(`SIGTERM: checkpointed step (\d+)`).FindStringSubmatch(one)
	if m == nil {
		t.Fatalf("first run did not checkpoint on SIGTERM:\n%s", one)
	}
	saved, _ := strconv.Atoi(m[1])
	s1, s2 := steps(one), steps(two)
	if s1[len(s1)-1] != saved {
		t.Errorf("first run reached step %d but saved %d: steps lost beyond the checkpoint", s1[len(s1)-1], saved)
	}
	if !strings.Contains(two, fmt.Sprintf("at step %d", saved)) || len(s2) == 0 || s2[0] != saved+1 {
		t.Errorf("second run did not resume right after step %d:\n%s", saved, two)
	}
	if !strings.Contains(two, "done: 80 steps") || len(s1)+len(s2) != 80 {
		t.Errorf("steps run %d + %d, want 80 in all", len(s1), len(s2))
	}
}

// TestServerOutageKillsNothing: with the server down for many heartbeat
// intervals, every workload keeps running; when it returns, the agent
// reconciles with the same allocations.
func TestServerOutageKillsNothing(t *testing.T) {
	f := newFleet(t)
	n1 := f.startAgent("n1", "")
	n2 := f.startAgent("n2", "")
	var jobs, allocs []string
	var pids []int
	for i, ra := range []*runningAgent{n1, n2} {
		j := f.submit(api.JobRequest{Name: fmt.Sprintf("long-%d", i), GPUs: 8}, "train", "-steps", "100000", "-step-time", "100ms")
		var a string
		eventually(t, "bound", func() error {
			jj := f.job(j)
			if len(jj.Allocations) == 0 {
				return fmt.Errorf("pending")
			}
			a = jj.Allocations[0].ID
			return nil
		})
		ra = f.agents[f.job(j).Allocations[0].NodeID]
		f.running(ra, j)
		jobs, allocs, pids = append(jobs, j), append(allocs, a), append(pids, ra.pid(t, a))
	}
	accepted, _ := n1.Counts()
	f.stopServer()
	time.Sleep(20 * hbInterval) // far past the node-lost threshold of a live server
	for i, pid := range pids {
		if !alive(pid) {
			t.Fatalf("%s (pid %d) died while the server was down", allocs[i], pid)
		}
	}
	for _, ra := range []*runningAgent{n1, n2} {
		for _, a := range ra.Allocations() {
			if a.State != model.ActualRunning {
				t.Fatalf("%s is %s during the outage", a.ID, a.State)
			}
		}
	}
	f.startServer()
	eventually(t, "agents reconcile", func() error {
		if now, _ := n1.Counts(); now <= accepted {
			return fmt.Errorf("no orders accepted since the restart")
		}
		return nil
	})
	time.Sleep(10 * hbInterval)
	for i, j := range jobs {
		jj := f.job(j)
		if jj.State != model.JobRunning || len(jj.Allocations) != 1 || jj.Allocations[0].ID != allocs[i] || jj.PreemptCount != 0 {
			t.Fatalf("after the outage job %s is %s with %v, want running as %s", j, jj.State, jj.Allocations, allocs[i])
		}
		if !alive(pids[i]) {
			t.Fatalf("%s died after reconciling", allocs[i])
		}
	}
}

// TestAgentRestartAdoptsItsWork: an agent restarted in the same boot is
// the same incarnation: same epoch, the workload it ran keeps running
// under the same allocation, and the job is never requeued.
func TestAgentRestartAdoptsItsWork(t *testing.T) {
	f := newFleet(t)
	n1 := f.startAgent("n1", "")
	j := f.submit(api.JobRequest{Name: "survivor", GPUs: 4}, "train", "-steps", "100000", "-step-time", "50ms")
	old := f.running(n1, j)
	pid := n1.pid(t, old)
	f.stopAgent("n1", false) // the agent goes; its work stays, as after a crash
	if !alive(pid) {
		t.Fatal("stopping the agent killed its work")
	}
	again := f.startAgent("n1", "")
	if again.Epoch() != n1.Epoch() {
		t.Fatalf("epoch %d after %d in the same boot", again.Epoch(), n1.Epoch())
	}
	if !alive(pid) {
		t.Fatalf("pid %d did not survive the agent's restart", pid)
	}
	if got := f.running(again, j); got != old {
		t.Fatalf("allocation %s after the restart, was %s", got, old)
	}
	for _, e := range f.job(j).History {
		if e.Event == "requeued" {
			t.Errorf("the job was requeued by an agent restart: %v", f.job(j).History)
		}
	}
	// The adopted workload is still the agent's to stop.
	if _, err := f.api.CancelJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	eventually(t, "adopted workload stopped on cancel", func() error {
		if alive(pid) {
			return fmt.Errorf("pid %d still runs", pid)
		}
		return nil
	})
	f.waitState(j, model.JobCancelled)
}

// TestRebootIsANewEpoch: a new boot id is a new epoch. The server
// invalidates every allocation the node had (node_rebooted) and requeues
// the job from the checkpoint its process wrote.
func TestRebootIsANewEpoch(t *testing.T) {
	f := newFleet(t)
	f.boot["n1"] = "boot-1"
	n1 := f.startAgent("n1", "")
	j := f.submit(api.JobRequest{Name: "rebooted", GPUs: 4, Checkpoint: &api.CheckpointRequest{Path: t.TempDir(), Bytes: 1 << 20}},
		"train", "-steps", "100000", "-step-time", "20ms", "-checkpoint-every", "5")
	old := f.running(n1, j)
	pid := n1.pid(t, old)
	eventually(t, "a periodic checkpoint recorded", func() error {
		if f.job(j).Run().Restore == "" {
			return fmt.Errorf("no restore point yet")
		}
		return nil
	})
	f.stopAgent("n1", false)
	f.boot["n1"] = "boot-2"
	again := f.startAgent("n1", "")
	if again.Epoch() != n1.Epoch()+1 {
		t.Fatalf("epoch %d after %d across a reboot", again.Epoch(), n1.Epoch())
	}
	if alive(pid) {
		t.Fatalf("pid %d from the old boot survived the new epoch's start", pid)
	}
	eventually(t, "job rebound under the new epoch", func() error {
		jj := f.job(j)
		if jj.State != model.JobRunning || len(jj.Allocations) == 0 || jj.Allocations[0].ID == old {
			return fmt.Errorf("%s %v", jj.State, jj.Allocations)
		}
		return nil
	})
	jj := f.job(j)
	if !slices.ContainsFunc(jj.History, func(e model.Event) bool { return e.Event == "requeued" && e.Detail == "node_rebooted" }) {
		t.Errorf("history does not record the reboot: %v", jj.History)
	}
	if jj.Run().Restore == "" {
		t.Errorf("requeued without a restore point: %v", jj.History)
	}
	n, err := f.node("n1")
	if err != nil {
		t.Fatal(err)
	}
	if c := n.IdentityChange; c == nil || c.Reason != "node_rebooted" || c.Invalidated != 1 {
		t.Errorf("node identity change %+v, want node_rebooted with 1 invalidated", c)
	}
}

// TestUnknownAllocationStopped: work the control plane does not list
// (under its current fence) is stopped; the agent keeps it out of the
// report once the exit is in.
func TestUnknownAllocationStopped(t *testing.T) {
	f := newFleet(t)
	n1 := f.startAgent("n1", "")
	j := f.submit(api.JobRequest{Name: "cancelled", GPUs: 2}, "train", "-steps", "100000", "-step-time", "50ms")
	a := f.running(n1, j)
	if _, err := f.api.CancelJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cancelled job's process gone and released", func() error {
		for _, x := range n1.Allocations() {
			if x.ID == a {
				return fmt.Errorf("%s still %s", a, x.State)
			}
		}
		return nil
	})
	if jj := f.job(j); jj.State != model.JobCancelled || len(jj.Allocations) != 0 {
		t.Fatalf("job %s with %v", jj.State, jj.Allocations)
	}
}

// TestInferenceReplicasServeAndDrain: a deployment's replicas are real
// HTTP servers on their GPUs; scaling down drains one (SIGTERM, exit 0)
// and the other keeps serving.
func TestInferenceReplicasServeAndDrain(t *testing.T) {
	f := newFleet(t)
	n1 := f.startAgent("n1", "")
	two := 2
	req := api.DeploymentRequest{Name: "chat", Model: "chat-7b", Team: "t", MinReplicas: 1, MaxReplicas: 4, Desired: &two,
		ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"},
		Command:      []string{os.Args[0]}, Env: map[string]string{"BERTH_TEST_WORKLOAD": "serve"}}
	if err := f.api.Do(context.Background(), "POST", "/v1/deployments", req, nil); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	eventually(t, "two replicas serving", func() error {
		for _, a := range n1.Allocations() {
			b, err := os.ReadFile(filepath.Join(n1.stateDir, "allocs", a.ID, "addr"))
			if err == nil && a.State == model.ActualRunning {
				addrs[a.ID] = strings.TrimSpace(string(b))
			}
		}
		if len(addrs) != 2 {
			return fmt.Errorf("%d serving", len(addrs))
		}
		return nil
	})
	for id, addr := range addrs {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatalf("replica %s: %v", id, err)
		}
		var r workload.Reply
		json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if r.Deployment != "chat" || r.Alloc != id || r.GPUs == "" {
			t.Fatalf("replica %s answered %+v", id, r)
		}
	}
	if _, err := f.api.Scale(context.Background(), "chat", 1); err != nil {
		t.Fatal(err)
	}
	var stopped string
	eventually(t, "one replica drained and released", func() error {
		left := n1.Allocations()
		if len(left) != 1 {
			return fmt.Errorf("%v", left)
		}
		for id := range addrs {
			if id != left[0].ID {
				stopped = id
			}
		}
		return nil
	})
	if !strings.Contains(readLog(t, n1, stopped, "stdout.log"), "drained after") {
		t.Errorf("stopped replica did not drain:\n%s", readLog(t, n1, stopped, "stdout.log"))
	}
	if b, _ := os.ReadFile(filepath.Join(n1.stateDir, "allocs", stopped, "exit")); !strings.Contains(string(b), `"state":"exited"`) || strings.Contains(string(b), "exit_code") {
		t.Errorf("drained replica's exit record %s, want exit 0", b)
	}
	for id, addr := range addrs {
		if id == stopped {
			continue
		}
		if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("remaining replica %s not serving: %v", id, err)
		}
	}
}
