package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
)

// TestDashboardView: the page's data agrees with the table, cell by cell,
// and a team sees its own queue and no alerts.
func TestDashboardView(t *testing.T) {
	started := time.Now()
	c := newCluster(t)
	mine := c.token("team:ml/research")
	other := c.token("team:ml/nlp")
	run := c.submit(c.admin, api.JobRequest{Name: "run", Org: "ml", Team: "research", GPUs: 8, Topology: "node"})
	c.waitRunning(run.JobID)
	// Two jobs that cannot fit anywhere while the rest is held: one per team.
	for _, x := range []struct{ tok, team string }{{mine, "research"}, {other, "nlp"}} {
		c.submit(x.tok, api.JobRequest{Name: "wait-" + x.team, Org: "ml", Team: x.team, GPUs: 24, Topology: "any"})
	}
	var d Dashboard
	c.eventually("two jobs queued with reasons", func() error {
		if err := c.getJSON(c.admin, "/v1/dashboard", &d); err != nil {
			return err
		}
		if len(d.Queue) != 2 || d.Queue[0].Reason == "" {
			return fmt.Errorf("queue %+v", d.Queue)
		}
		return nil
	})
	// Waiting counts from the job's queued time (its submission when it
	// was never requeued): at most the test's own age.
	for _, q := range d.Queue {
		w, err := time.ParseDuration(q.Waiting)
		if err != nil || w < 0 || w > time.Since(started) {
			t.Errorf("queued job %s waiting %q, the test is %s old", q.ID, q.Waiting, time.Since(started))
		}
	}
	// The dashboard's topology is the API's, computed by the same code.
	// The state may move under the reads (a hold taken for a waiting
	// job takes GPUs out of the free count), so compare a dashboard read
	// taken between two API reads that agree.
	c.eventually("the dashboard's topology is the API's", func() error {
		before := c.instance().Topology()
		if err := c.getJSON(c.admin, "/v1/dashboard", &d); err != nil {
			return err
		}
		after := c.instance().Topology()
		if before.LargestPlaceable != after.LargestPlaceable || before.FreeGPUs != after.FreeGPUs {
			return fmt.Errorf("the fleet changed during the reads")
		}
		if d.Topology.LargestPlaceable != after.LargestPlaceable || d.Topology.FreeGPUs != after.FreeGPUs {
			return fmt.Errorf("dashboard topology %+v, API %+v", d.Topology, after)
		}
		return nil
	})
	cells := 0
	for _, p := range d.Pods {
		for _, n := range p.Nodes {
			for _, g := range n.GPUs {
				if g.Owner == run.JobID {
					if g.Kind != "training" || g.Alloc == "" {
						t.Errorf("cell %+v", g)
					}
					cells++
				}
			}
		}
	}
	if cells != 8 {
		t.Errorf("%d cells owned by %s, want 8", cells, run.JobID)
	}
	if want := float64(8) / float64(d.Topology.TotalGPUs); d.Utilization != want {
		t.Errorf("utilization %v, want %v", d.Utilization, want)
	}
	var team Dashboard
	if err := c.getJSON(mine, "/v1/dashboard", &team); err != nil {
		t.Fatal(err)
	}
	if len(team.Queue) != 1 || team.Queue[0].Team != "research" || len(team.Alerts) != 0 {
		t.Errorf("team view: queue %+v, %d alerts", team.Queue, len(team.Alerts))
	}
	if status, _ := c.raw(c.token("agent:n1"), "GET", "/v1/dashboard", nil); status != 403 {
		t.Errorf("agent token read the dashboard: %d", status)
	}
	status, body := c.raw("", "GET", "/", nil)
	if status != 200 || !strings.Contains(string(body), "largest placeable") {
		t.Errorf("GET / = %d", status)
	}
}
