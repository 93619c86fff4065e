package agent

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// TestUsageRecordsFinishedWork: a job that ran, one cancelled while it
// waited and a replica scaled away each leave a usage record, and
// GET /v1/usage adds them up for the team, and for no other team.
func TestUsageRecordsFinishedWork(t *testing.T) {
	f := newFleet(t)
	f.startAgent("n1", "")
	ctx := context.Background()
	t0 := time.Now()
	ran := f.submit(api.JobRequest{Name: "ran", GPUs: 2}, "train", "--steps", "10", "--step-time", "50ms")
	f.waitState(ran, model.JobCompleted)
	elapsed := time.Since(t0)
	// A drained node starts nothing new.
	if err := f.api.Do(ctx, "POST", "/v1/nodes/n1/drain", nil, nil); err != nil {
		t.Fatal(err)
	}
	waited := f.submit(api.JobRequest{Name: "waits", GPUs: 1}, "train")
	time.Sleep(300 * time.Millisecond)
	if _, err := f.api.CancelJob(ctx, waited); err != nil {
		t.Fatal(err)
	}
	if err := f.api.Do(ctx, "POST", "/v1/nodes/n1/undrain", nil, nil); err != nil {
		t.Fatal(err)
	}
	one := 1
	dep := api.DeploymentRequest{Name: "chat", Team: "t", MinReplicas: 0, MaxReplicas: 2, Desired: &one,
		ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"},
		Command:      []string{os.Args[0]}, Env: map[string]string{"BERTH_TEST_WORKLOAD": "serve"}}
	if err := f.api.Do(ctx, "POST", "/v1/deployments", dep, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replica runs", func() error {
		var d api.Deployment
		if err := f.api.Do(ctx, "GET", "/v1/deployments/chat", nil, &d); err != nil || d.Ready != 1 {
			return fmt.Errorf("%+v %v", d, err)
		}
		return nil
	})
	if _, err := f.api.Scale(ctx, "chat", 0); err != nil {
		t.Fatal(err)
	}
	var u api.Usage
	eventually(t, "three records for team t", func() error {
		if err := f.api.Do(ctx, "GET", "/v1/usage?since=1h&by=team", nil, &u); err != nil {
			return err
		}
		if len(u.Rows) != 1 || u.Rows[0].Jobs != 2 || u.Rows[0].Replicas != 1 {
			return fmt.Errorf("%+v", u.Rows)
		}
		return nil
	})
	r := u.Rows[0]
	// The job held 2 GPUs for at most the time from submit to completion.
	if r.GPUHours <= 0 || r.GPUHours > 2*elapsed.Hours()+1*time.Since(t0).Hours()+0.001 {
		t.Errorf("GPU-hours %v for 2 GPUs over %v and a replica", r.GPUHours, elapsed)
	}
	if r.QueueP90Hours < (200 * time.Millisecond).Hours() {
		t.Errorf("queue p90 %vh: the cancelled job waited at least 300 ms", r.QueueP90Hours)
	}
	tok, err := f.api.CreateToken(ctx, "team:u", "other")
	if err != nil {
		t.Fatal(err)
	}
	var other api.Usage
	if err := client.New(f.listen, tok.Secret).Do(ctx, "GET", "/v1/usage?since=1h", nil, &other); err != nil || len(other.Rows) != 0 {
		t.Fatalf("another team's usage view: %+v %v", other.Rows, err)
	}
	var bad *client.StatusError
	if err := f.api.Do(ctx, "GET", "/v1/usage?by=colour", nil, nil); !asStatus(err, &bad) || bad.Status != 400 || bad.Body.Field != "by" {
		t.Fatalf("by=colour: %v", err)
	}
}

func asStatus(err error, se **client.StatusError) bool {
	e, ok := err.(*client.StatusError)
	*se = e
	return ok
}
