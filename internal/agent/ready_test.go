package agent

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

func deploy(t *testing.T, f *fleet, name string, ready *model.Readiness, args ...string) {
	t.Helper()
	req := api.DeploymentRequest{Name: name, Model: "m", Team: "t", MinReplicas: 1, MaxReplicas: 1,
		ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, Readiness: ready,
		Command: append([]string{os.Args[0]}, args...), Env: map[string]string{"BERTH_TEST_WORKLOAD": "serve"}}
	if err := f.api.Do(context.Background(), "POST", "/v1/deployments", req, nil); err != nil {
		t.Fatal(err)
	}
}

func deployment(t *testing.T, f *fleet, name string) api.Deployment {
	t.Helper()
	var d api.Deployment
	if err := f.api.Do(context.Background(), "GET", "/v1/deployments/"+name, nil, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReplicaReadyAfterItsCheckPasses (R4): a replica serves once its
// readiness check passes, not once its process runs: the model loads for
// two seconds, /healthz answers 503 until then, and the deployment counts
// it ready only after. A replica whose check never passes is never ready.
func TestReplicaReadyAfterItsCheckPasses(t *testing.T) {
	f := newFleet(t)
	f.startAgent("n1", "")
	deploy(t, f, "slow", &model.Readiness{HTTP: "/healthz"}, "-load-time", "2s")
	var placed time.Time
	eventually(t, "the replica placed and running", func() error {
		d := deployment(t, f, "slow")
		if d.Actual != 1 {
			return fmt.Errorf("actual %d", d.Actual)
		}
		if d.Ready != 0 {
			return fmt.Errorf("ready %d before its model could load", d.Ready)
		}
		placed = time.Now()
		return nil
	})
	eventually(t, "the replica ready", func() error {
		if d := deployment(t, f, "slow"); d.Ready != 1 {
			return fmt.Errorf("ready %d", d.Ready)
		}
		return nil
	})
	// The process starts a moment before it is placed as seen here; its
	// load takes 2 s from its start.
	if waited := time.Since(placed); waited < time.Second {
		t.Errorf("ready %s after it ran; its model takes 2 s to load", waited)
	}

	deploy(t, f, "never", &model.Readiness{Command: []string{"false"}})
	eventually(t, "the second replica running", func() error {
		if d := deployment(t, f, "never"); d.Actual != 1 {
			return fmt.Errorf("actual %d", d.Actual)
		}
		return nil
	})
	time.Sleep(time.Second)
	if d := deployment(t, f, "never"); d.Ready != 0 {
		t.Fatalf("a replica whose check fails counts %d ready", d.Ready)
	}
	// Without a check, a running replica is ready.
	deploy(t, f, "plain", nil)
	eventually(t, "a replica with no check ready once running", func() error {
		if d := deployment(t, f, "plain"); d.Ready != 1 {
			return fmt.Errorf("ready %d", d.Ready)
		}
		return nil
	})
}
