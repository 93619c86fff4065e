package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// boundFleet is one 8-GPU node, a 4-GPU inference replica wanted from 1 h
// to 3 h, and two jobs: a (8 GPUs, 2 h of work, priority 10, at 0) and b
// (2 GPUs, 1 h, priority 5, at 0.5 h).
func boundFleet(elastic bool) *Workload {
	h := time.Hour
	w := &Workload{Name: "t", Horizon: 10 * h,
		Nodes: []model.Node{{ID: "n0", Pod: "p", GPUs: 8, Health: model.HealthHealthy}},
		Jobs: []JobSpec{
			{ID: "a", Submit: 0, Work: 2 * h, Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Priority: 10},
			{ID: "b", Submit: h / 2, Work: h, Shape: model.Shape{GPUs: 2, Topology: model.TopologyNode}, Priority: 5},
		},
		Services: []ServiceSpec{{ID: "s", Shape: model.Shape{GPUs: 4, Topology: model.TopologyNode}, Min: 0, Max: 1,
			Demand: []DemandPoint{{At: h, Replicas: 1}, {At: 3 * h, Replicas: 0}}}},
	}
	if elastic {
		w.Jobs[0].Elastic = &model.Elastic{MinGPUs: 4, MaxGPUs: 8}
	}
	return w
}

// TestFluidByHand: the fluid row worked out by hand. a runs from 0; b
// arrives to no free GPU; at 1 h inference takes 4 GPUs, a (8) no longer
// fits and pauses, b runs 1-2 h; a resumes when inference leaves at 3 h
// and ends at 4 h. So b waited 0.5 h and a 2 h, though a started at once.
func TestFluidByHand(t *testing.T) {
	m := Fluid(boundFleet(false), Options{})
	want := map[string]float64{"<8": 0.5, "8-63": 2, "<64": 2}
	for c, p90 := range want {
		if got := m.QueueHours[c]; got.P90 != p90 {
			t.Errorf("queue %s: %+v, want p90 %.1f h", c, got, p90)
		}
	}
	if got := m.FirstStartQueueHours["8-63"]; got.Count != 1 || got.P90 != 0 {
		t.Errorf("first start 8-63: %+v, want a at once", got)
	}
	if got := m.FirstStartQueueHours["<8"]; got.Count != 1 || got.P90 != 0.5 {
		t.Errorf("first start <8: %+v, want 0.5 h", got)
	}
	if !m.Bound || m.JobsSubmitted != 2 || m.SimulatedHours != 10 {
		t.Errorf("bound %v, jobs %d, hours %.1f", m.Bound, m.JobsSubmitted, m.SimulatedHours)
	}
}

// TestBoundByHand: bound replays each class alone. b alone never waits;
// a alone still pauses for inference from 1 h to 3 h; <64 is both, as in
// the fluid row.
func TestBoundByHand(t *testing.T) {
	m := Bound(boundFleet(false), Options{})
	want := map[string]float64{"<8": 0, "8-63": 2, "<64": 2}
	for c, p90 := range want {
		if got := m.QueueHours[c]; got.P90 != p90 || got.Count == 0 {
			t.Errorf("queue %s: %+v, want p90 %.1f h", c, got, p90)
		}
	}
	if got := m.QueueHours["<64"]; got.Count != 2 || got.P50 != 0.5 {
		t.Errorf("queue <64: %+v, want b's 0.5 h and a's 2 h", got)
	}
	if got := m.QueueHours["64-255"]; got.Count != 0 {
		t.Errorf("queue 64-255: %+v, want no jobs", got)
	}
}

// TestFluidElastic: an elastic a (4-8 GPUs) shrinks to the 4 left at 1 h
// instead of pausing, and runs at half speed: its last hour of work takes
// 1-3 h. b, ranked after it, gets nothing until 3 h: 2.5 h waited.
func TestFluidElastic(t *testing.T) {
	m := Fluid(boundFleet(true), Options{})
	if got := m.QueueHours["8-63"]; got.P90 != 0 {
		t.Errorf("queue 8-63: %+v, want the elastic job never to wait", got)
	}
	if got := m.QueueHours["<8"]; got.P90 != 2.5 {
		t.Errorf("queue <8: %+v, want 2.5 h", got)
	}
}

// TestBoundNeverFits: a job larger than the fleet never starts; it counts
// with every hour it waited, as a policy's unplaced job does.
func TestBoundNeverFits(t *testing.T) {
	w := boundFleet(false)
	w.Jobs = append(w.Jobs, JobSpec{ID: "c", Submit: 4 * time.Hour, Work: time.Hour, Shape: model.Shape{GPUs: 16, Topology: model.TopologyAny}})
	m := Bound(w, Options{})
	if got := m.QueueHours["8-63"]; got.Count != 2 || got.P99 != 6 {
		t.Errorf("queue 8-63: %+v, want c's 6 h to the horizon", got)
	}
	if got := m.FirstStartQueueHours["8-63"]; got.Count != 2 || got.P99 != 6 {
		t.Errorf("first start 8-63: %+v, want c never started, 6 h", got)
	}
}

// TestRelaxationRows: both rows come with a report when asked, count the
// same jobs in every class as a policy does, fill only the queue figures
// (the table says "-" for the rest, the JSON marks them bound), and the
// names are valid --policy values.
func TestRelaxationRows(t *testing.T) {
	c, _ := LoadSeedConfig("")
	c.Days = 2
	rep, err := NewReport(Seed(c, 3), []string{"best-fit", FluidName, BoundName}, Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	fluid, bound := rep.Policies[1], rep.Policies[2]
	if fluid.Policy != FluidName || bound.Policy != BoundName || !fluid.Bound || !bound.Bound || rep.Policies[0].Bound {
		t.Fatalf("rows: %s %s %s", rep.Policies[0].Policy, fluid.Policy, bound.Policy)
	}
	for _, cl := range []string{"<8", "8-63", "<64", "64-255", ">=256"} {
		f, b, bf := fluid.QueueHours[cl], bound.QueueHours[cl], rep.Policies[0].QueueHours[cl]
		if f.Count != bf.Count || b.Count != bf.Count {
			t.Errorf("class %s: %d jobs in fluid, %d in bound, %d in best-fit", cl, f.Count, b.Count, bf.Count)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(table.String(), "\n") {
		if strings.Contains(l, "GPU allocation %") && !strings.HasSuffix(strings.TrimSpace(l), "-") {
			t.Errorf("allocation row gives the bound a figure: %q", l)
		}
	}
	var b bytes.Buffer
	rep.WriteJSON(&b)
	var back struct {
		Policies []struct {
			Policy string `json:"policy"`
			Bound  bool   `json:"bound"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || !back.Policies[2].Bound || back.Policies[0].Bound {
		t.Fatalf("json: %v %+v", err, back)
	}
	if err := CheckPolicy(BoundName); err != nil {
		t.Error(err)
	}
	if err := CheckPolicy("oracle"); err == nil || !strings.Contains(err.Error(), BoundName) {
		t.Errorf("unknown policy: %v", err)
	}
}

// TestFluidSLOByHand: a 64-GPU gang (priority 50, 2 h) and an 8-GPU job
// (priority 5, 1 h) arrive together on 64 GPUs. By priority the gang runs
// first and the small job waits its 2 h. In fluid-slo the gang runs
// first too, until the small job has waited 20 minutes: then it runs (the
// gang pauses, 64 GPUs no longer free) for its hour, and the gang resumes
// at 80 minutes, having waited 1 h.
func TestFluidSLOByHand(t *testing.T) {
	h := time.Hour
	w := &Workload{Name: "t", Horizon: 10 * h,
		Jobs: []JobSpec{
			{ID: "gang", Work: 2 * h, Shape: model.Shape{GPUs: 64, Topology: model.TopologyPod}, Priority: 50},
			{ID: "small", Work: h, Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Priority: 5},
		}}
	for i := range 8 {
		w.Nodes = append(w.Nodes, model.Node{ID: fmt.Sprint("n", i), Pod: "p", GPUs: 8, Health: model.HealthHealthy})
	}
	for _, c := range []struct {
		m          *Metrics
		gang, less float64
	}{{Fluid(w, Options{}), 0, 2}, {FluidSLO(w, Options{}), 1, 0.33}} {
		if g, s := c.m.QueueHours["64-255"].P90, c.m.QueueHours["<64"].P90; g != c.gang || s != c.less {
			t.Errorf("%s: gang waited %.1f h, small %.1f h; want %.1f and %.1f", c.m.Policy, g, s, c.gang, c.less)
		}
	}
}

// TestFluidSharesAddUpExactly: shares of 1, 1 and 998 milli and a 7-GPU
// job fill 8 GPUs exactly; the 7-GPU job runs at once (in floats the
// shares left 6.999... free and it waited).
func TestFluidSharesAddUpExactly(t *testing.T) {
	h := time.Hour
	share := func(id string, milli int) JobSpec {
		return JobSpec{ID: id, Work: h, Shape: model.Shape{GPUs: 1, GPUMilli: milli, Topology: model.TopologyNode}, Priority: 10}
	}
	w := &Workload{Name: "t", Horizon: 10 * h,
		Nodes: []model.Node{{ID: "n0", Pod: "p", GPUs: 8, Health: model.HealthHealthy}},
		Jobs:  []JobSpec{share("s1", 1), share("s2", 1), share("s3", 998), {ID: "seven", Work: h, Shape: model.Shape{GPUs: 7, Topology: model.TopologyNode}}}}
	if got := Fluid(w, Options{}).QueueHours["<64"]; got.Count != 4 || got.P99 != 0 {
		t.Errorf("queue <64: %+v, want four jobs and no wait", got)
	}
}

// TestBoundHorizonAndTraces: a job submitted at the horizon itself counts,
// with no wait, as the engine counts it; with no horizon (a trace) the
// replay runs until every job is done, with the same waits as by hand.
func TestBoundHorizonAndTraces(t *testing.T) {
	w := boundFleet(false)
	w.Jobs = append(w.Jobs, JobSpec{ID: "last", Submit: w.Horizon, Work: time.Hour, Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode}})
	if got := Fluid(w, Options{}).QueueHours["<8"]; got.Count != 2 || got.P99 != 0.5 {
		t.Errorf("queue <8 with a job at the horizon: %+v, want b's 0.5 h and the last job's 0", got)
	}
	w = boundFleet(false)
	w.Horizon = 0
	m := Fluid(w, Options{})
	if got := m.QueueHours["<64"]; got.Count != 2 || got.P50 != 0.5 || got.P90 != 2 || m.SimulatedHours != 4 {
		t.Errorf("no horizon: queue <64 %+v over %.1f h, want 0.5 and 2 h over the 4 h until a ends", got, m.SimulatedHours)
	}
}

// TestRelaxationRowsAlone: a report of relaxation rows only says how long
// it covered and writes its HTML (the queue plots, nothing to compare).
func TestRelaxationRowsAlone(t *testing.T) {
	c, _ := LoadSeedConfig("")
	c.Days = 1
	rep, err := NewReport(Seed(c, 1), []string{FluidName, BoundName}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Hours != 24 || rep.Jobs == 0 {
		t.Errorf("report covers %.1f h and %d jobs, want 24 h and the day's jobs", rep.Hours, rep.Jobs)
	}
	if err := rep.WriteHTML(t.TempDir()); err != nil {
		t.Fatalf("HTML of relaxation rows alone: %v", err)
	}
}
