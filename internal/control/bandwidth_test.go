package control

import (
	"math"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// TestCheckpointReportsCountPerTeam: the control loop records each
// checkpoint report under its job's org/team, keeps eight per team (a
// team reporting every heartbeat cannot push another's out), takes no
// report dated ahead of its clock, and measures the storage as fast as
// the faster of two teams (sched.MeasuredBandwidth: the upper median).
func TestCheckpointReportsCountPerTeam(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: 2 * time.Second})
	h.beat(report("n1", 1, 8))
	h.beat(report("n2", 1, 8))
	on := map[string]model.Allocation{}
	for _, team := range []string{"good", "evil"} {
		j := trainingJob(team, 8)
		j.Org, j.Team, j.Preemptible = "ml", team, true
		j.Checkpoint = &model.Checkpoint{Path: "/ckpt/" + team, SizeBytes: 2 << 30}
		h.submit(j)
		on[team] = h.waitRunning(team, 1)[0]
	}
	beat := func(team string, bytes int64, secs float64, at time.Time) {
		a := on[team]
		h.beat(report(a.NodeID, 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualRunning,
			CheckpointStats: &model.CheckpointStats{Bytes: bytes, Seconds: secs, At: at}}))
	}
	near := func(what string, want float64) {
		t.Helper()
		if got := h.ctl.MeasuredBandwidth(); math.Abs(got-want) > 0.01*want {
			t.Fatalf("%s: measured %.3g B/s, want %.3g", what, got, want)
		}
	}
	now := h.clk.Now()
	beat("good", 2e9, 4, now)
	near("good's report alone", 0.5e9)
	beat("evil", 1e9, 100, now)
	near("evil's slow report beside it", 0.5e9)
	for i := range 20 {
		beat("evil", 1e9, 100, now.Add(time.Duration(i+1)*time.Second))
	}
	recs := h.ctl.checkpointRecords()
	if len(recs) != 9 || recs[0].Source != "ml/good" {
		t.Fatalf("%d records kept, the first from %q; want good's one and evil's newest eight", len(recs), recs[0].Source)
	}
	near("after evil's flood", 0.5e9)
	// An agent repeats its last report every heartbeat: evil's first,
	// dropped for its eight newer ones, comes back and is dropped again,
	// with no write.
	docRev := func() int64 {
		var r int64
		h.st.Cache().Read(func(v store.View) {
			e, _ := v.Get(store.Docs, docCheckpoints)
			r = e.ModRev
		})
		return r
	}
	before := docRev()
	beat("evil", 1e9, 100, now)
	if after := docRev(); after != before {
		t.Fatalf("a report dropped already came back and rewrote the record (revision %d→%d)", before, after)
	}
	beat("evil", 1e9, 100, now.Add(2*time.Hour))
	if got := h.ctl.checkpointRecords(); len(got) != 9 || got[len(got)-1].End.After(now.Add(time.Minute)) {
		t.Fatalf("a report dated two hours ahead was recorded: %+v", got[len(got)-1])
	}
	near("after a report dated ahead", 0.5e9)
}
