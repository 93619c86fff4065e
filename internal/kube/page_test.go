package kube

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthsched/berth/internal/browsertest"
	"github.com/berthsched/berth/internal/sched"
)

// The page a replica serves, in a real browser: the headline is the
// status's largest_placeable and free GPUs, every pending owner has its
// row with the core's reason, and a page shows with its priced options.
func TestPageInABrowser(t *testing.T) {
	browser := browsertest.Chromium(t)
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	e.node("b", 8, "leaf1")
	e.pod("low", 8, ann(AnnPreemptible, "true", AnnCheckpoint, "s3://ckpt/low", AnnCheckpointBytes, "1000000000", AnnPriority, "1"))
	e.pod("mid", 8, ann(AnnPreemptible, "true", AnnCheckpoint, "s3://ckpt/mid", AnnCheckpointBytes, "1000000000", AnnPriority, "2"))
	// Any preemption exceeds this budget: a scale-up above min pages.
	s := New(kc.cs, Config{Namespace: e.ns, Sched: sched.Config{MinRuntime: time.Nanosecond, Budget: sched.Budget{Warn: 0.00001, Page: 0.00002}}}, 1)
	e.pass(s)
	rs := e.replicaSet("web")
	e.pod("web-1", 8, ownedBy(rs))
	e.pod("big-0", 8, ann(AnnGroup, "big", AnnGroupSize, "2"))
	e.pod("big-1", 8, ann(AnnGroup, "big", AnnGroupSize, "2"))
	d := e.pass(s)
	pages := 0
	for _, a := range d.Alerts {
		if a.Page != nil {
			pages++
		}
	}
	if pages == 0 || len(d.Pending) < 2 {
		t.Fatalf("the scene needs a page and two pending owners: alerts %+v, pending %+v", d.Alerts, d.Pending)
	}
	st := NewStatus()
	st.observe(1, d, s.TotalGPUs(), nil, time.Now())
	srv := httptest.NewServer(st.Handler())
	defer srv.Close()
	var body statusBody
	getJSON(t, srv.URL+"/v1/kube/status", &body)

	actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU)...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, time.Minute)
	defer cancelT()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(".alert.page"))); err != nil {
		t.Fatalf("no page drawn: %v", err)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	l := body.Topology.LargestPlaceable
	got := strings.Join([]string{text("#lp-node"), text("#lp-pod"), text("#lp-any"), text("#free"), text("#npending")}, "|")
	want := fmt.Sprintf("%d|%d|%d|%d / %d|%d", l.Node, l.Pod, l.Any, body.Topology.FreeGPUs, 16, len(body.Pending))
	if got != want {
		t.Fatalf("headline %s, status says %s", got, want)
	}
	for _, p := range body.Pending {
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(
			`[...document.querySelectorAll('#pending tr[data-owner=%q] td')].map(td => td.textContent)`, p.OwnerID)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 || rows[2] != p.Reason.Message {
			t.Fatalf("pending %s drawn as %q, want its reason %q", p.OwnerID, rows, p.Reason.Message)
		}
	}
	for _, a := range body.Alerts {
		if a.Page == nil {
			continue
		}
		for _, o := range a.Page.Actions {
			li, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
				`(document.querySelector('.alert[data-id=%q] li[data-action=%q]') || {}).textContent || ""`, a.ID, o.ID)))
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%s: %.1f GPU-hours, %d replicas", o.Label, o.CostGPUHours, o.Replicas); li != want {
				t.Fatalf("page %s option %s drawn as %q, want %q", a.ID, o.ID, li, want)
			}
		}
	}
}
