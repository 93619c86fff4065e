package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// matchFleet is one 8-GPU node, no inference, and two jobs arriving
// together: big (8 GPUs, 2 h of work, priority 1) and small (2 GPUs, 1 h,
// priority 9). Only one runs at a time.
func matchFleet() *Workload {
	h := time.Hour
	return &Workload{Name: "t", Horizon: 10 * h,
		Nodes: []model.Node{{ID: "n0", Pod: "p", GPUs: 8, Health: model.HealthHealthy}},
		Jobs: []JobSpec{
			{ID: "big", Work: 2 * h, Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Priority: 1},
			{ID: "small", Work: h, Shape: model.Shape{GPUs: 2, Topology: model.TopologyNode}, Priority: 9},
		}}
}

// targets is a row of the match policy with one wait per class, in hours.
func targets(waits map[string]float64) *Metrics {
	m := &Metrics{Policy: MatchPolicy, queue: map[string][]float64{}, QueueHours: map[string]Percentiles{}}
	for c, h := range waits {
		m.queue[c] = []float64{h}
		m.QueueHours[c] = percentiles(m.queue[c])
	}
	return m
}

// TestFluidMatchMeetsByDeadline: targets of 0.5 h for big and 3 h for
// small can both be met, but not in priority order (small first: big
// waits 1 h). Least slack first runs big at once and small at 2 h.
func TestFluidMatchMeetsByDeadline(t *testing.T) {
	w := matchFleet()
	if got := Fluid(w, Options{}).QueueHours["8-63"].P90; got != 1 {
		t.Fatalf("by priority big waits %.2f h, want 1 (the case this test is about)", got)
	}
	m := FluidMatch(w, Options{}, targets(map[string]float64{"<8": 3, "8-63": 0.5}))
	if big, small := m.QueueHours["8-63"].P90, m.QueueHours["<8"].P90; big != 0 || small != 2 {
		t.Errorf("big waited %.2f h and small %.2f h, want 0 and 2", big, small)
	}
	if !m.Bound || m.Policy != FluidMatchName || !strings.HasSuffix(m.Note, "meets every one") {
		t.Errorf("row %q (bound %v), note %q; want a relaxation row that meets every target", m.Policy, m.Bound, m.Note)
	}
}

// TestFluidMatchSaysWhatItMisses: 0.5 h for both cannot be met (whichever
// runs first, the other waits an hour or more). The row keeps a replay
// with one class over, not both (least slack first alone pauses each for
// the other in turn: both wait an hour), and its note names the class.
func TestFluidMatchSaysWhatItMisses(t *testing.T) {
	m := FluidMatch(matchFleet(), Options{}, targets(map[string]float64{"<8": 0.5, "8-63": 0.5}))
	big, small := m.QueueHours["8-63"].P90, m.QueueHours["<8"].P90
	if (big > 0.5) == (small > 0.5) {
		t.Fatalf("big waited %.2f h and small %.2f h: want exactly one over 0.5", big, small)
	}
	over := "8-63"
	if small > 0.5 {
		over = "<8"
	}
	if !strings.Contains(m.Note, "over it in "+over+" (") {
		t.Errorf("note %q: want %s named as over its target", m.Note, over)
	}
}

// TestFluidMatchInReport: the row reads best-fit's row when the report
// has one, and runs best-fit for itself when it does not, with the same
// result; it is a name --policy accepts.
func TestFluidMatchInReport(t *testing.T) {
	c, _ := LoadSeedConfig("")
	c.Days = 2
	w := Seed(c, 1)
	with, err := NewReport(w, []string{MatchPolicy, FluidMatchName}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := NewReport(w, []string{FluidMatchName}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(alone.Policies) != 1 || alone.Policies[0].Policy != FluidMatchName {
		t.Fatalf("alone: rows %d, want only fluid-match", len(alone.Policies))
	}
	a, b := with.Policies[1], alone.Policies[0]
	if a.Note != b.Note || a.Note == "" {
		t.Errorf("notes differ:\n%s\n%s", a.Note, b.Note)
	}
	for _, cl := range SizeClasses {
		if a.QueueHours[cl] != b.QueueHours[cl] {
			t.Errorf("%s: %+v with best-fit's row, %+v without", cl, a.QueueHours[cl], b.QueueHours[cl])
		}
	}
	if err := CheckPolicy(FluidMatchName); err != nil {
		t.Error(err)
	}
}

// oneNode8 is a workload of jobs on one 8-GPU node, no inference.
func oneNode8(horizon time.Duration, jobs ...JobSpec) *Workload {
	return &Workload{Name: "t", Horizon: horizon, Jobs: jobs,
		Nodes: []model.Node{{ID: "n0", Pod: "p", GPUs: 8, Health: model.HealthHealthy}}}
}

func job(id string, gpus int, submit, work time.Duration) JobSpec {
	return JobSpec{ID: id, Submit: submit, Work: work, Shape: model.Shape{GPUs: gpus, Topology: model.TopologyNode}}
}

// replayWith is one fluid-match replay of w in variant v against targets
// in hours.
func replayWith(w *Workload, waits map[string]float64, v matchVariant) *Metrics {
	goal, jobs, _ := matchGoals(w, targets(waits))
	return matchReplay(w, Options{}, goal, jobs, v)
}

// lostClass: s1 and s2 (7 GPUs, 1 h each, the <8 class's only jobs: no
// miss to spare) arrive together with a 0.5 h target, so one of them
// misses; big (8 GPUs, 1 h, target 5 h) arrives at 0.6 h.
func lostClass() *Workload {
	h := time.Hour
	return oneNode8(10*h, job("s1", 7, 0, h), job("s2", 7, 0, h), job("big", 8, 36*time.Minute, h))
}

// TestMatchLostClassFirst, by hand, with running jobs kept running: s1
// runs from 0. s2 is marked late at the first re-rank past 0.5 h (31
// min). Ranked first, it pauses s1 and runs to 91 min; s1 (late too by
// then) finishes its last 29 min at 2 h, having waited 1 h; big waits
// for both, 1.4 h. Ranked after the jobs in time, s2 waits for s1 and
// then for big, which arrived in time: 2 h, and big 0.4 h.
func TestMatchLostClassFirst(t *testing.T) {
	goals := map[string]float64{"<8": 0.5, "8-63": 5}
	for _, c := range []struct {
		lostFirst bool
		small     float64
		big       float64
	}{{true, 1, 1.4}, {false, 2, 0.4}} {
		m := replayWith(lostClass(), goals, matchVariant{margin: 1, lostFirst: c.lostFirst, sticky: true})
		if s, b := m.QueueHours["<8"].P90, m.QueueHours["8-63"].P90; s != c.small || b != c.big {
			t.Errorf("lost first %v: <8 p90 %.2f h, big %.2f h; want %.2f and %.2f", c.lostFirst, s, b, c.small, c.big)
		}
	}
	// The row keeps the variant least over the target.
	m := FluidMatch(lostClass(), Options{}, targets(goals))
	if s := m.QueueHours["<8"].P90; s > 1.05 || !strings.Contains(m.Note, "over it in <8 (") {
		t.Errorf("row: <8 p90 %.2f h, note %q; want about 1 h and <8 named over", s, m.Note)
	}
}

// TestMatchSpareMiss: the <8 class has ten jobs, so its p90 spares one
// miss. big (8 GPUs, 2 h, target 0.1 h) runs first; wide (7 GPUs, 1 h)
// misses its 0.5 h waiting for it. At 2 h nine 1-GPU jobs of 6 minutes
// arrive: wide, a miss the class can spare, waits behind them, and they
// all start within 6 minutes. Run first, wide would leave them one GPU
// between them and the class over its target.
func TestMatchSpareMiss(t *testing.T) {
	h := time.Hour
	w := oneNode8(10*h, job("big", 8, 0, 2*h), job("wide", 7, 0, h))
	for i := range 9 {
		w.Jobs = append(w.Jobs, job(fmt.Sprint("tiny", i), 1, 2*h, 6*time.Minute))
	}
	goals := map[string]float64{"<8": 0.5, "8-63": 0.1}
	m := replayWith(w, goals, matchVariant{margin: 1, lostFirst: true, sticky: true})
	q := m.QueueHours["<8"]
	if q.Count != 10 || q.P90 != 0.1 || q.P99 != 2.1 {
		t.Errorf("<8: %+v; want ten jobs, p90 0.1 h (the ninth tiny job) and wide's 2.1 h", q)
	}
	if f := FluidMatch(w, Options{}, targets(goals)); !strings.HasSuffix(f.Note, "meets every one") {
		t.Errorf("row note %q: want every target met", f.Note)
	}
}

// TestFluidMatchTraceEnds: with no horizon (a trace), the replay ends
// when the last job does, as the other rows do.
func TestFluidMatchTraceEnds(t *testing.T) {
	w := lostClass()
	w.Horizon = 0
	done := make(chan *Metrics, 1)
	go func() { done <- FluidMatch(w, Options{}, targets(map[string]float64{"<8": 0.5, "8-63": 5})) }()
	select {
	case m := <-done:
		if m.SimulatedHours > 4 || m.QueueHours["<8"].Count != 2 {
			t.Errorf("ran %.2f h with %d <8 jobs; want the 3 h or so until the last job ends, and both", m.SimulatedHours, m.QueueHours["<8"].Count)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fluid-match with no horizon did not end")
	}
}

// TestFluidMatchUsesTheReportsRow: a report that has a best-fit row
// measures fluid-match against that row, not against a run of its own
// (the command line adds rows one at a time and would run best-fit
// twice).
func TestFluidMatchUsesTheReportsRow(t *testing.T) {
	w := lostClass()
	rep := StartReport(w, Options{})
	rep.Policies = append(rep.Policies, targets(map[string]float64{"<8": 7.77, "8-63": 9.99}))
	if err := rep.Add(w, FluidMatchName, Options{}); err != nil {
		t.Fatal(err)
	}
	if n := rep.Policies[1].Note; !strings.Contains(n, "<8 7.77 h, 8-63 9.99 h") {
		t.Errorf("note %q: want the report's best-fit row's targets", n)
	}
}
