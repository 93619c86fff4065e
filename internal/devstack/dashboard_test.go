package devstack

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/browsertest"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/sched"
)

func waitUntil(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

// TestDashboardInABrowser runs a berth dev stack and drives its dashboard
// in Chromium: the headline matches the API, a submitted job appears in
// the grid without a reload, and a page's action button takes the action.
func TestDashboardInABrowser(t *testing.T) {
	browser := browsertest.Chromium(t)
	// Any preemption exceeds this budget: a scale-up above min pages.
	s, err := Start(context.Background(), Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Nodes: 4, Pods: 2, GPUsPerNode: 8,
		Interval: 200 * time.Millisecond, Berth: "/bin/false", HistoryEvery: 300 * time.Millisecond,
		Sched: sched.Config{MinRuntime: time.Millisecond, Budget: sched.Budget{Warn: 0.00001, Page: 0.00002}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })

	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1000))...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL()), chromedp.WaitVisible(chromedp.CSS("#app"))); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}

	headlineMatches := func() error {
		want, err := s.API.Topology(ctx)
		if err != nil {
			return err
		}
		var got string
		for _, id := range []string{"#lp-node", "#lp-pod", "#lp-any", "#free"} {
			v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(id)))
			if err != nil {
				return err
			}
			got += v + "|"
		}
		exp := fmt.Sprintf("%d|%d|%d|%d / %d|", want.LargestPlaceable.Node, want.LargestPlaceable.Pod, want.LargestPlaceable.Any, want.FreeGPUs, want.TotalGPUs)
		if got != exp {
			return fmt.Errorf("page shows %s, API says %s", got, exp)
		}
		return nil
	}
	waitUntil(t, "headline equals the API on an empty fleet", headlineMatches)

	// A submitted job appears in the grid, live.
	acc, err := s.API.SubmitJob(ctx, api.JobRequest{Name: "first", Team: "research", GPUs: 8, Topology: "node", Preemptible: true,
		Checkpoint: &api.CheckpointRequest{Path: "/ckpt/first", Bytes: 1e9}, Command: []string{"sleep", "600"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	submitted := time.Now()
	cells := fmt.Sprintf(`document.querySelectorAll('.gpu[data-owner=%q][data-kind="training"]').length`, acc.JobID)
	waitUntil(t, "job in the grid", func() error {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](cells))
		if err != nil {
			return err
		}
		if n != 8 {
			return fmt.Errorf("%d cells of %s", n, acc.JobID)
		}
		return nil
	})
	t.Logf("job %s drawn %v after submit (the page polls every second)", acc.JobID, time.Since(submitted).Round(time.Millisecond))
	waitUntil(t, "headline equals the API with the job placed", headlineMatches)

	// The plots draw the server's samples: the utilization line ends at
	// the share of GPUs the job holds, as the table's newest sample has it.
	waitUntil(t, "plots of the last hours", func() error {
		var h struct {
			Samples []struct {
				AllocatedGPUs int `json:"allocated_gpus"`
			}
		}
		if err := s.API.Do(ctx, http.MethodGet, "/v1/history?since=1h", nil, &h); err != nil {
			return err
		}
		pts, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[...document.querySelectorAll("#plots polyline")].map(p => p.getAttribute("points").split(" ").filter(Boolean).length)`))
		if err != nil {
			return err
		}
		if len(pts) != 9 || len(h.Samples) < 2 {
			return fmt.Errorf("%d polylines %v, %d samples", len(pts), pts, len(h.Samples))
		}
		for _, n := range pts {
			if n < 2 {
				return fmt.Errorf("a plot line with %d points: %v", n, pts)
			}
		}
		if h.Samples[len(h.Samples)-1].AllocatedGPUs != 8 {
			return fmt.Errorf("newest sample has %d GPUs allocated", h.Samples[len(h.Samples)-1].AllocatedGPUs)
		}
		return nil
	})

	// A job's page: click one of its GPUs; its history and log tail.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`.gpu[data-owner=%q]`, acc.JobID)))); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the job's page", func() error {
		txt, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#detail")))
		if err != nil {
			return err
		}
		for _, want := range []string{"job " + acc.JobID, "history", "bound", "log (last 40 lines"} {
			if !strings.Contains(txt, want) {
				return fmt.Errorf("job page lacks %q: %q", want, txt)
			}
		}
		return nil
	})
	// A node's page, and its drain button (admin).
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.node[data-node="n002"] .name`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#detail button[data-node-action="drain"]`))); err != nil {
		t.Fatalf("no drain button on the node page: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#detail button[data-node-action="drain"]`))); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "n002 drained from its page", func() error {
		var n api.Node
		if err := s.API.Do(ctx, http.MethodGet, "/v1/nodes/n002", nil, &n); err != nil {
			return err
		}
		if !n.Draining {
			return fmt.Errorf("n002 not draining")
		}
		return nil
	})
	if err := s.API.Do(ctx, http.MethodPost, "/v1/nodes/n002/undrain", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#detail-close"))); err != nil {
		t.Fatal(err)
	}
	// The quota view lists a quota set through the API.
	if err := s.API.Do(ctx, http.MethodPut, "/v1/quotas/default/research", api.QuotaRequest{GuaranteedGPUs: 16}, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the quota view", func() error {
		txt, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#quotas")))
		if err != nil {
			return err
		}
		if !strings.Contains(txt, "default/research") || !strings.Contains(txt, "16") {
			return fmt.Errorf("quotas read %q", txt)
		}
		return nil
	})

	// Fill the fleet with preemptible training; ask inference for more
	// than the budget lets it take: a page with priced options.
	for i := range 3 {
		if _, err := s.API.SubmitJob(ctx, api.JobRequest{Name: "fill-" + strconv.Itoa(i), Team: "research", GPUs: 8, Topology: "node",
			Preemptible: true, Checkpoint: &api.CheckpointRequest{Path: "/ckpt/fill", Bytes: 1e9}, Command: []string{"sleep", "600"}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "fleet full", func() error {
		if top, _ := s.API.Topology(ctx); top.FreeGPUs != 0 {
			return fmt.Errorf("%d free", top.FreeGPUs)
		}
		return nil
	})
	two := 2
	if err := s.API.Do(ctx, http.MethodPost, "/v1/deployments", api.DeploymentRequest{Name: "chat", Model: "chat-70b", Team: "serving",
		ReplicaShape: api.ReplicaShape{GPUs: 8, Topology: "node"}, MinReplicas: 1, MaxReplicas: 4, Desired: &two}, nil); err != nil {
		t.Fatal(err)
	}
	var page control.AlertRecord
	waitUntil(t, "a page", func() error {
		var list struct{ Alerts []control.AlertRecord }
		if err := s.API.Do(ctx, http.MethodGet, "/v1/alerts", nil, &list); err != nil {
			return err
		}
		for _, a := range list.Alerts {
			if a.Page != nil && a.ResolvedAt == nil {
				page = a
				return nil
			}
		}
		var d api.Deployment
		s.API.Do(ctx, http.MethodGet, "/v1/deployments/chat", nil, &d)
		return fmt.Errorf("no open page among %+v; chat %d/%d %+v", list.Alerts, d.Actual, d.Target, d.Pending)
	})
	button := fmt.Sprintf(`[data-alert=%q] button[data-action="accept_degraded"]`, page.ID)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(button))); err != nil {
		t.Fatalf("page %s has no accept_degraded button: %v", page.ID, err)
	}
	// The page says its numbers once, as the API has them, and the
	// deployment's pending reason is the same sentence (one computation).
	waitUntil(t, "the page's message shown once, as the API has it", func() error {
		var a control.AlertRecord
		if err := s.API.Do(ctx, http.MethodGet, "/v1/alerts/"+url.PathEscape(page.ID), nil, &a); err != nil {
			return err
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(fmt.Sprintf(`[data-alert=%q]`, page.ID))))
		if err != nil {
			return err
		}
		pg := a.Page
		if pg == nil {
			return fmt.Errorf("alert %s has no page", a.ID)
		}
		if n := strings.Count(text, "the preemption budget holds back"); n != 1 {
			return fmt.Errorf("the budget's sentence appears %d times in %q", n, text)
		}
		for _, want := range []string{fmt.Sprintf("took %.0f%%/h", 100*pg.Rate), fmt.Sprintf("take it to %.0f%%/h", 100*pg.RateAfter),
			fmt.Sprintf("over the %.0f%%/h limit", 100*pg.Limit), fmt.Sprintf("restores %d of the", pg.Restores)} {
			if !strings.Contains(text, want) || !strings.Contains(a.Message, want) {
				return fmt.Errorf("page %q / message %q: want %q, from the page's own fields", text, a.Message, want)
			}
		}
		if strings.Contains(text, "SAFE") || strings.Contains(text, " 1 replicas") || strings.Contains(text, " 1 GPUs") {
			return fmt.Errorf("jargon or a bad plural: %q", text)
		}
		var d api.Deployment
		if err := s.API.Do(ctx, http.MethodGet, "/v1/deployments/chat", nil, &d); err != nil {
			return err
		}
		if d.Pending == nil || !strings.Contains(a.Message, d.Pending.Message) {
			return fmt.Errorf("chat's pending reason %+v is not the page's %q", d.Pending, a.Message)
		}
		return nil
	})
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(shot, png, 0o644)
		t.Logf("screenshot: %s", shot)
		if p := os.Getenv("BERTH_SCREENSHOT"); p != "" {
			os.WriteFile(p, png, 0o644)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(button))); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the action recorded", func() error {
		var a control.AlertRecord
		if err := s.API.Do(ctx, http.MethodGet, "/v1/alerts/"+url.PathEscape(page.ID), nil, &a); err != nil {
			return err
		}
		if a.Choice == nil || a.Choice.Action != "accept_degraded" || a.Choice.By == "" {
			return fmt.Errorf("choice %+v", a.Choice)
		}
		return nil
	})
	waitUntil(t, "the page shows the choice", func() error {
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(fmt.Sprintf(`[data-alert=%q]`, page.ID))))
		if err != nil {
			return err
		}
		if !strings.Contains(text, "chosen: accept_degraded") {
			return fmt.Errorf("alert reads %q", text)
		}
		return nil
	})
}
