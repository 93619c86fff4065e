package ha

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent/ctrtest"
	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// TestFaultAgentKill9KeepsContainers: a job that names an image runs in
// a container; kill -9 of `berth agent` leaves it running (podman's
// conmon holds it, the shim its client); the restarted agent adopts it
// under the same allocation, nothing is requeued, its log has every line;
// a cancel then stops it and removes the container.
func TestFaultAgentKill9KeepsContainers(t *testing.T) {
	podman, err := ctrtest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	c := single(t)
	c.agentArgs = append([]string{"--podman", podman, "--container-runtime", ctrtest.Runtime}, containerArgs()...)
	dir := filepath.Join(t.TempDir(), "n1")
	stopWorkloads(t, dir)
	t.Cleanup(func() { ctrtest.Remove(podman, dir) })
	ag := c.startAgent("n1", dir, "")
	c.waitEpoch("n1", 1)
	req := api.JobRequest{Name: "boxed", Team: "t", GPUs: 2, Topology: "node", Image: ctrtest.Image,
		Command: []string{"sh", "-c", `trap 'exit 0' TERM; i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.1; done`}}
	acc, err := c.submit(req, "boxed", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.runningOn(dir, acc.JobID)
	name := "berth-" + a.ID
	logPath := filepath.Join(dir, "allocs", a.ID, "stdout.log")
	c.eventually("the container writes", 30*time.Second, func() error {
		if n, _ := ticks(t, logPath); n < 5 {
			return fmt.Errorf("%d ticks", n)
		}
		return nil
	})

	ag.kill()
	_, before := ticks(t, logPath)
	time.Sleep(3 * time.Second)
	if !running(podman, name) {
		t.Fatalf("container %s died with the agent", name)
	}
	if _, during := ticks(t, logPath); during < before+10 {
		t.Errorf("the container logged %d lines while the agent was dead, want about 30", during-before)
	}

	c.startAgent("n1", dir, "")
	c.waitEpoch("n1", 1)
	time.Sleep(2 * time.Second) // several heartbeats under the new agent
	j, err := c.job(acc.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != model.JobRunning || len(j.Allocations) != 1 || j.Allocations[0].ID != a.ID {
		t.Errorf("after the agent's restart: %s %v, want allocation %s running", j.State, j.Allocations, a.ID)
	}
	if slices.ContainsFunc(j.History, func(e model.Event) bool { return e.Event == "requeued" }) {
		t.Errorf("requeued: %v", j.History)
	}
	if !running(podman, name) {
		t.Fatal("the container died when the agent came back")
	}
	if lines, last := ticks(t, logPath); lines != last {
		t.Errorf("the container's log: %d lines up to tick %d: want every line", lines, last)
	}
	if st, body, _, err := c.client(c.admin).do(http.MethodDelete, "/v1/jobs/"+acc.JobID, nil); err != nil || st >= 300 {
		t.Fatalf("cancel: %d %s %v", st, body, err)
	}
	c.eventually("the adopted container removed on cancel", 30*time.Second, func() error {
		if ctrtest.Exists(podman, name) {
			return fmt.Errorf("%s still there", name)
		}
		return nil
	})
}

// containerArgs are ctrtest.Args as agent flags.
func containerArgs() []string {
	var out []string
	for _, a := range ctrtest.Args {
		out = append(out, "--container-arg="+a)
	}
	return out
}

func running(podman, name string) bool {
	out, err := exec.Command(podman, "--runtime", ctrtest.Runtime, "inspect", "--format", "{{.State.Running}}", name).Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}
