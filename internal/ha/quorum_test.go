package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// TestQuorumLoss: with one etcd member of three gone, berth carries on;
// with two gone, writes stop with an error that says why, running work
// carries on, and once the members return nothing is lost or corrupt.
func TestQuorumLoss(t *testing.T) {
	c, f, acc, alloc, pid := steady(t)
	leader, _, _ := c.waitLeader(nil, 30*time.Second)
	var followers []*member
	for _, m := range c.members {
		if m != leader {
			followers = append(followers, m)
		}
	}

	// One member down: submits still work.
	c.kill(followers[0])
	one, err := c.submit(api.JobRequest{Name: "one-down", Team: "t", GPUs: 1, Topology: "node", Command: sleeper}, "one-down", 20*time.Second)
	if err != nil {
		t.Fatalf("with one etcd member of three down, a submit failed: %v", err)
	}

	// Two down: the last server has no quorum.
	c.kill(followers[1])
	var msg string
	c.eventually("writes refused with a clear error", 30*time.Second, func() error {
		st, body, _, err := request(leader.api, c.admin, http.MethodPost, "/v1/jobs",
			api.JobRequest{Name: "two-down", Team: "t", GPUs: 1, Topology: "node", Command: sleeper}, "Idempotency-Key", "two-down")
		if err != nil {
			return err
		}
		if st < 500 {
			return fmt.Errorf("status %d %s", st, body)
		}
		var eb api.ErrorBody
		json.Unmarshal(body, &eb)
		msg = eb.Error.Message
		return nil
	})
	t.Logf("without quorum, a submit answers: %s", msg)
	if !strings.Contains(msg, "etcd") || !(strings.Contains(msg, "quorum") || strings.Contains(msg, "leader")) {
		t.Errorf("the error does not say why: %q", msg)
	}
	time.Sleep(3 * time.Second)
	if !alive(pid) {
		t.Fatal("the running workload died with the quorum")
	}
	for _, a := range f.agents[alloc.NodeID].Allocations() {
		if a.ID == alloc.ID && a.State != model.ActualRunning {
			t.Fatalf("%s is %s without quorum", a.ID, a.State)
		}
	}

	// Both back: service resumes and the table is whole.
	c.start(followers[0], "")
	c.start(followers[1], "")
	c.waitLeader(nil, 60*time.Second)
	if _, err := c.submit(api.JobRequest{Name: "recovered", Team: "t", GPUs: 1, Topology: "node", Command: sleeper}, "recovered", 30*time.Second); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	for _, id := range []string{acc.JobID, one.JobID} {
		if _, err := c.job(id); err != nil {
			t.Fatalf("job %s lost: %v", id, err)
		}
	}
	j, _ := c.job(acc.JobID)
	if j.State != model.JobRunning || len(j.Allocations) == 0 || j.Allocations[0].ID != alloc.ID || !alive(pid) {
		t.Fatalf("the running job after recovery: %s %v alive=%v", j.State, j.Allocations, alive(pid))
	}
	c.noDoubleBinding()
}
