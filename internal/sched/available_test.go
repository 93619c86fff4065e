package sched

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

func availNode(id, pool string) model.Node {
	return model.Node{ID: id, Pod: "p", Pool: pool, Model: "H100", GPUs: 8, CPUMilli: 64000, MemoryMiB: 1024, Health: model.HealthHealthy, BootEpoch: 1}
}

// GPUs a reservation holds or targets are not free to a new job; the index
// is left as it was.
func TestAvailableLeavesOutReservedGPUs(t *testing.T) {
	nodes := []model.Node{availNode("n0", ""), availNode("n1", "")}
	allocs := []model.Allocation{{ID: "a1", NodeID: "n1", GPUs: model.MaskOf(0, 1, 2, 3), OwnerKind: model.OwnerTraining, OwnerID: "x"}}
	ix := NewIndex(nodes, allocs, Config{})
	raw := ix.Summary(false)
	if raw.LargestPlaceable.Node != 8 || raw.FreeNodesFull != 1 || raw.FreeGPUs != 12 {
		t.Fatalf("raw summary %+v: want node 8, one free node, 12 free", raw)
	}
	res := []Reservation{{Owner: "r", Kind: model.OwnerTraining,
		Held: []Part{{Node: "n0", GPUs: model.MaskOf(0, 1, 2, 3)}},
		// GPU 0 of n1 is allocated already: it is not taken twice.
		Target: []Part{{Node: "n0", GPUs: model.MaskOf(4, 5)}, {Node: "n1", GPUs: model.MaskOf(0)}}}}
	got := Available(ix, res, Config{}, false)
	// n0 keeps GPUs 6-7 free, n1 keeps 4-7.
	if got.LargestPlaceable.Node != 4 || got.FreeNodesFull != 0 || got.FreeGPUs != 6 || got.LargestPlaceable.Any != 6 {
		t.Errorf("available %+v: want largest node 4, any 6, no free node, 6 free GPUs", got)
	}
	if after := ix.Summary(false); after.LargestPlaceable != raw.LargestPlaceable || after.FreeGPUs != raw.FreeGPUs || after.FreeNodesFull != raw.FreeNodesFull {
		t.Errorf("Available changed the index: %+v, was %+v", after, raw)
	}
}

// With pools, largest_placeable and free_nodes_full count only the pools a
// new preemptible training job may use: the training pool above
// small_max_gpus, the small pool up to it, and the inference pool's
// headroom it may borrow (up to borrow_max_gpus). Without borrowing the
// inference pool's free GPUs are not counted.
func TestAvailableCountsOnlyOwnPools(t *testing.T) {
	lend := Config{Pools: DefaultPools()}
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	reclaimed := func(ago time.Duration, reclaim bool) []PreemptionRecord {
		return []PreemptionRecord{{At: t0.Add(-ago), JobID: "x", GPUs: 8, Reclaim: reclaim}}
	}
	own := lend
	own.Pools.BorrowInference = false
	nodes := []model.Node{availNode("t", "training"), availNode("i", "inference"), availNode("s", "small")}
	two := []model.Allocation{{ID: "a1", NodeID: "t", GPUs: model.MaskOf(0, 1), OwnerKind: model.OwnerTraining, OwnerID: "x"}}
	full := []model.Allocation{{ID: "a1", NodeID: "t", GPUs: model.FullMask(8), OwnerKind: model.OwnerTraining, OwnerID: "x"}}
	if raw := NewIndex(nodes, two, lend).Largest(); raw.Node != 8 {
		t.Fatalf("raw largest node %d, want 8 (the inference or small node)", raw.Node)
	}
	tests := []struct {
		name    string
		cfg     Config
		allocs  []model.Allocation
		largest Largest
		full    int
	}{
		{"training 6 free, inference lends its 8", lend, two, Largest{8, 8, 8}, 1},
		{"training 6 free, nothing lent", own, two, Largest{6, 6, 6}, 0},
		{"training full, inference lends", lend, full, Largest{8, 8, 8}, 1},
		{"training full, nothing lent: the small pool, capped", own, full, Largest{4, 4, 4}, 0},
		{"all empty, nothing lent: a whole node of its own", own, nil, Largest{8, 8, 8}, 1},
		// R3: below storage.min_bandwidth (20 GB/s by default) preemption
		// stops, so the pool is not lent; at or above it, or unmeasured, it is.
		{"training 6 free, storage degraded: nothing lent", lend.Lending(5e9, nil, t0), two, Largest{6, 6, 6}, 0},
		{"training 6 free, storage at 20 GB/s: lent", lend.Lending(20e9, nil, t0), two, Largest{8, 8, 8}, 1},
		{"training 6 free, nothing measured yet: lent", lend.Lending(0, nil, t0), two, Largest{8, 8, 8}, 1},
		// Inference took back lent GPUs within the hour: not lent.
		{"training 6 free, reclaimed 59m ago: nothing lent", lend.Lending(0, reclaimed(59*time.Minute, true), t0), two, Largest{6, 6, 6}, 0},
		{"training 6 free, reclaimed 1h ago: lent", lend.Lending(0, reclaimed(time.Hour, true), t0), two, Largest{8, 8, 8}, 1},
		{"training 6 free, a preemption for training 1m ago: lent", lend.Lending(0, reclaimed(time.Minute, false), t0), two, Largest{8, 8, 8}, 1},
	}
	for _, tt := range tests {
		got := Available(NewIndex(nodes, tt.allocs, tt.cfg), nil, tt.cfg, false)
		if got.LargestPlaceable != tt.largest || got.FreeNodesFull != tt.full {
			t.Errorf("%s: available %+v / %d free nodes, want %+v / %d", tt.name, got.LargestPlaceable, got.FreeNodesFull, tt.largest, tt.full)
		}
	}
	if got := Available(NewIndex(nodes, two, own), nil, own, false); got.FreeGPUs != 22 {
		t.Errorf("free_gpus %d, want every pool's 22", got.FreeGPUs)
	}
	// A gang above borrow_max_gpus cannot borrow: a 32-GPU pod of
	// inference nodes lends at most 32.
	var big []model.Node
	for i := 0; i < 8; i++ {
		big = append(big, availNode(fmt.Sprintf("i%d", i), "inference"))
	}
	big = append(big, availNode("t", "training"))
	capped := lend
	capped.Pools.BorrowMaxGPUs = 16
	if got := Available(NewIndex(big, nil, capped), nil, capped, false); got.LargestPlaceable.Pod != 16 {
		t.Errorf("64 free inference GPUs with borrow_max_gpus 16: largest pod %d, want 16", got.LargestPlaceable.Pod)
	}
}

// from is s reported by source.
func from(s CheckpointSample, source string) CheckpointSample {
	s.Source = source
	return s
}

// flood is n slow 1 GB checkpoints of source, one a second from 200 s.
func flood(at func(int) time.Time, n int, source string) []CheckpointSample {
	var out []CheckpointSample
	for i := range n {
		out = append(out, CheckpointSample{Bytes: 1e9, Start: at(200 + i - 1000), End: at(200 + i), Complete: true, Source: source})
	}
	return out
}

func TestMeasuredBandwidth(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sample := func(bytes float64, from, to int, complete bool) CheckpointSample {
		return CheckpointSample{Bytes: int64(bytes), Start: at(from), End: at(to), Complete: complete}
	}
	a := sample(100e9, 0, 100, true)
	b := sample(100e9, 50, 150, true)     // overlaps a
	c := sample(30e9, 200, 230, true)     // after a gap
	old := sample(1e9, 0, 100, false)     // killed, older than the newest complete
	miss := sample(10e9, 240, 270, false) // killed, newer
	fast := sample(1000e9, 240, 250, false)
	for _, tc := range []struct {
		name    string
		samples []CheckpointSample
		want    float64
	}{
		{"none", nil, 0},
		{"one", []CheckpointSample{a}, 1e9},
		// Overlapping: 200 GB over the union [0, 150 s], not the sum of
		// their times (250 s) nor each one's own rate (1 GB/s).
		{"overlapping", []CheckpointSample{a, b}, 200e9 / 150},
		{"order does not matter", []CheckpointSample{b, a}, 200e9 / 150},
		// A gap between busy spans is not counted: 230 GB over 180 s.
		{"with a gap", []CheckpointSample{a, b, c}, 230e9 / 180},
		// A kill newer than the newest complete caps at its bytes/seconds.
		{"newer kill caps", []CheckpointSample{a, b, c, miss}, 10e9 / 30},
		// A cap above the estimate does not raise it.
		{"newer kill above", []CheckpointSample{a, b, c, fast}, 230e9 / 180},
		// An older kill is ignored: storage has delivered since.
		{"older kill ignored", []CheckpointSample{old, a, b, c}, 230e9 / 180},
		{"only kills", []CheckpointSample{miss, fast}, 10e9 / 30},
		// Only the newest MaxCheckpointSamples (by End) count: a slow
		// write that ended before them (with it, 801 GB over 1,090 s) is
		// beyond them; the eight writes of a at once show 800 GB over
		// 100 s.
		{"window", append([]CheckpointSample{sample(1e9, -1000, -10, true)}, a, a, a, a, a, a, a, a), 8e9},
		// By End, not by place: the same slow write reported last (an
		// agent repeating an old report) is still the oldest.
		{"window by end", append([]CheckpointSample{a, a, a, a, a, a, a, a}, sample(1e9, -1000, -10, true)), 8e9},
		// A few kilobytes in a millisecond measure latency: left out,
		// complete or killed, so they neither set nor cap the estimate.
		{"tiny ones left out", []CheckpointSample{a, {Bytes: 4096, Start: at(300), End: at(301), Complete: true},
			{Bytes: 4096, Start: at(302), End: at(303)}}, 1e9},
		{"only tiny ones", []CheckpointSample{{Bytes: 4096, Start: at(300), End: at(301), Complete: true}}, 0},
		// Each source (org/team) is measured alone, and the storage is as
		// fast as the upper median of those that reported within the hour
		// (of two, the faster): a team that reports slow writes (or is
		// killed at every deadline) lowers only its own figure.
		{"a slow team beside a fast one", []CheckpointSample{from(a, "ml/a"), from(sample(1e9, 300, 1300, true), "ml/evil"),
			from(sample(1e9, 1400, 1410, false), "ml/evil")}, 1e9},
		{"every team slow", []CheckpointSample{from(sample(10e9, 0, 100, true), "ml/a"), from(sample(20e9, 50, 250, true), "ml/b")}, 0.1e9},
		// A team whose last report is over an hour older than the newest
		// does not vote: its fast write was before the storage slowed.
		{"a stale fast team", []CheckpointSample{from(a, "ml/a"), from(sample(10e9, 3700, 3800, true), "ml/b")}, 0.1e9},
		// With three or more teams, the middle one: a team reporting
		// impossibly fast writes cannot keep the guard off either.
		{"a fast liar among three slow", []CheckpointSample{from(sample(10e9, 0, 100, true), "ml/a"), from(sample(10e9, 0, 100, true), "ml/b"),
			from(sample(1000e9, 90, 91, true), "ml/liar")}, 0.1e9},
		{"a slow liar among three fast", []CheckpointSample{from(a, "ml/a"), from(b, "ml/b"), from(sample(1e9, 0, 1000, true), "ml/liar")}, 1e9},
		// A team reporting every heartbeat keeps only its newest eight;
		// the others' samples stay.
		{"a flood does not push others out", append([]CheckpointSample{from(a, "ml/a")}, flood(at, 20, "ml/evil")...), 1e9},
	} {
		if got := MeasuredBandwidth(tc.samples); math.Abs(got-tc.want) > 1e-6*tc.want+1e-9 {
			t.Errorf("%s: %.6g B/s, want %.6g", tc.name, got, tc.want)
		}
	}
	if got := KeepSamples(append([]CheckpointSample{from(a, "ml/a")}, flood(at, 20, "ml/evil")...),
		func(s *CheckpointSample) CheckpointSample { return *s }); len(got) != 1+MaxCheckpointSamples || got[0].Source != "ml/a" {
		t.Errorf("kept %d samples (first from %q), want ml/a's one and ml/evil's newest %d", len(got), got[0].Source, MaxCheckpointSamples)
	}
}

// TestPlanBandwidthIsCapped: deadlines are never planned with more than
// the configured bandwidth, however fast a report says the storage is,
// and never run past storage.max_deadline, however large a checkpoint a
// job declares.
func TestPlanBandwidthIsCapped(t *testing.T) {
	c := Config{Storage: Storage{Bandwidth: 100e9}}.withDefaults()
	j := &model.Job{Checkpoint: &model.Checkpoint{Path: "/c", SizeBytes: 1000e9}}
	for _, tc := range []struct {
		measured float64
		want     time.Duration
	}{
		{0, 30 * time.Second},       // none: 1000 GB / 100 GB/s × 3
		{50e9, 60 * time.Second},    // slower: longer
		{10000e9, 30 * time.Second}, // a report 100× the storage: capped
		{0.1e9, 10 * time.Minute},   // 30,000 s at 0.1 GB/s: max_deadline
	} {
		if got := StopDeadline(j, c, tc.measured); got != tc.want {
			t.Errorf("measured %.0f GB/s: deadline %s, want %s", tc.measured/1e9, got, tc.want)
		}
	}
	huge := &model.Job{Checkpoint: &model.Checkpoint{Path: "/c", SizeBytes: 1 << 50}} // the API's largest: 1 PiB
	if got := StopDeadline(huge, c, 1); got != 10*time.Minute {
		t.Errorf("1 PiB at 1 B/s: deadline %s, want the 10m cap", got)
	}
}
