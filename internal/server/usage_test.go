package server

import (
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// TestSummarizeUsage: finished jobs count whole in the window they ended
// in, replicas for their part inside it, running work from its start or
// the window's; teams see their own; queue quantiles by nearest rank.
func TestSummarizeUsage(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	since := now.Add(-10 * time.Hour)
	h := func(x float64) time.Time { return now.Add(time.Duration(x * float64(time.Hour))) }
	recs := []model.UsageRecord{
		{ID: "j1", Kind: model.OwnerTraining, Org: "default", Team: "a", GPUs: 8, Start: h(-30), End: h(-2), GPUSeconds: 8 * 3600 * 20, WaitSeconds: 3600, Preemptions: 2},
		{ID: "j2", Kind: model.OwnerTraining, Org: "default", Team: "a", GPUs: 1, Start: h(-3), End: h(-1), GPUSeconds: 3600, WaitSeconds: 1800},
		{ID: "j3", Kind: model.OwnerTraining, Org: "default", Team: "a", GPUs: 1, Start: h(-3), End: h(-1), GPUSeconds: 0, WaitSeconds: 7200},
		// A replica that lived 20 h, 5 of them inside the window.
		{ID: "a1", Kind: model.OwnerInference, Org: "default", Team: "b", GPUs: 4, Start: h(-25), End: h(-5), GPUSeconds: 4 * 3600 * 20},
		{ID: "j4", Kind: model.OwnerTraining, Org: "acme", Team: "a", GPUs: 2, Start: h(-5), End: h(-4), GPUSeconds: 7200},
	}
	running := []usageLive{
		{alloc: model.Allocation{OwnerKind: model.OwnerTraining, GPUs: 0b11, CreatedAt: h(-20)}, org: "default", team: "a"},
		{alloc: model.Allocation{OwnerKind: model.OwnerBackfill, GPUMilli: 500, CreatedAt: h(-2)}, org: "default", team: "a"},
	}
	all := func(string, string) bool { return true }
	u := summarizeUsage(recs, running, since, now, "team", all)
	got := map[string]struct {
		jobs, reps, pre int
		gpuh, run       float64
		p50, p90        float64
	}{}
	for _, r := range u.Rows {
		got[r.Key] = struct {
			jobs, reps, pre int
			gpuh, run       float64
			p50, p90        float64
		}{r.Jobs, r.Replicas, r.Preemptions, r.GPUHours, r.RunningGPUHours, r.QueueP50Hours, r.QueueP90Hours}
	}
	if a := got["default/a"]; a.jobs != 3 || a.pre != 2 || a.gpuh != 161 || a.run != 21 || a.p50 != 1 || a.p90 != 2 {
		t.Errorf("default/a: %+v", a)
	}
	if b := got["default/b"]; b.reps != 1 || b.gpuh != 20 || b.jobs != 0 {
		t.Errorf("default/b: %+v", b)
	}
	if c := got["acme/a"]; c.jobs != 1 || c.gpuh != 2 {
		t.Errorf("acme/a: %+v", c)
	}
	if u.Rows[0].Key != "default/a" {
		t.Errorf("rows not by GPU-hours: %+v", u.Rows)
	}
	k := summarizeUsage(recs, running, since, now, "kind", all)
	if len(k.Rows) != 2 || k.Rows[0].Key != "training" || k.Rows[1].Key != "inference" {
		t.Errorf("by kind: %+v", k.Rows)
	}
	onlyB := summarizeUsage(recs, running, since, now, "org", func(org, team string) bool { return org == "default" && team == "b" })
	if len(onlyB.Rows) != 1 || onlyB.Rows[0].Key != "default" || onlyB.Rows[0].Replicas != 1 || onlyB.Rows[0].Jobs != 0 {
		t.Errorf("team b's view: %+v", onlyB.Rows)
	}
}
