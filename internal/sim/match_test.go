package sim

import (
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
