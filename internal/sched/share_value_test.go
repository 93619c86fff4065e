package sched

import (
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

func fractions(sizeP ...float64) ShareMix {
	var m ShareMix
	for i := 0; i < len(sizeP); i += 2 {
		m = append(m, ShareType{GPUs: 1, GPUMilli: int(sizeP[i]), P: sizeP[i+1]})
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// What a size is worth is what the LP charges it, and that depends on
// what else comes: an 810 beside many 160s gives up a sixth of its GPU
// to them; among few, it keeps the whole GPU.
func TestGapValues(t *testing.T) {
	tests := []struct {
		name  string
		mix   ShareMix
		sizes []int
		price []float64
		at    map[int]float64 // value at some free milli
	}{
		{"halves", fractions(500, 1), []int{500}, []float64{0.5},
			map[int]float64{0: 0, 499: 0, 500: 0.5, 999: 0.5, 1000: 1}},
		{"810s among many 160s", fractions(810, 0.2, 160, 0.8), []int{160, 810}, []float64{1.0 / 6, 5.0 / 6},
			map[int]float64{159: 0, 160: 1.0 / 6, 190: 1.0 / 6, 809: 5.0 / 6, 810: 5.0 / 6, 970: 1, 1000: 1}},
		{"810s among few 160s", fractions(810, 0.8, 160, 0.2), []int{160, 810}, []float64{0, 1},
			map[int]float64{190: 0, 810: 1, 1000: 1}},
		// Two 470s fill a GPU to 940; a 320 beside one leaves 210 that
		// nothing here uses, so 530 free is worth a 470, not a 320.
		{"470s pair", fractions(470, 0.5, 650, 0.25, 320, 0.25), []int{320, 470, 650}, nil,
			map[int]float64{530: 0.5, 470: 0.5, 1000: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sizes, demand := fractionDemand(tt.mix)
			if !slices.Equal(sizes, tt.sizes) {
				t.Fatalf("sizes %v, want %v", sizes, tt.sizes)
			}
			v, y := solveGapValues(sizes, demand)
			for i := range tt.price {
				if !near(y[i], tt.price[i]) {
					t.Fatalf("prices %v, want %v", y, tt.price)
				}
			}
			for f, want := range tt.at {
				if !near(v[f], want) {
					t.Errorf("value[%d] = %v, want %v", f, v[f], want)
				}
			}
			if memo := gapValuesOf(tt.mix); !slices.Equal(memo, v) {
				t.Errorf("memoised values differ from a fresh solve")
			}
		})
	}
	if gapValuesOf(ShareMix{{GPUs: 1, GPUMilli: 1000, P: 1}, {GPUs: 4, GPUMilli: 1000, P: 1}}) != nil {
		t.Fatal("a mix without fractions has gap values")
	}
}

// The prices solve the LP: no GPU's worth of fractions is charged more
// than one GPU, and what they charge the demand lies between the lower
// bounds any packing obeys (total size; one GPU per fraction over half)
// and what first-fit decreasing achieves.
func TestGapValuesSolveTheLP(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 6).Draw(t, "sizes")
		sizes := rapid.SliceOfNDistinct(rapid.IntRange(40, 999), k, k, rapid.ID).Draw(t, "milli")
		sort.Ints(sizes)
		counts := rapid.SliceOfN(rapid.IntRange(1, 40), k, k).Draw(t, "counts")
		demand := make([]float64, k)
		for i, c := range counts {
			demand[i] = float64(c)
		}
		v, y := solveGapValues(sizes, demand)
		if v[0] != 0 || v[1000] > 1+1e-9 {
			t.Fatalf("value[0] = %v, value[1000] = %v: want 0 and at most one GPU", v[0], v[1000])
		}
		for f := 1; f <= 1000; f++ {
			if v[f] < v[f-1] {
				t.Fatalf("value falls from %v at %d to %v at %d", v[f-1], f-1, v[f], f)
			}
		}
		var lp, size, over float64
		var items []int
		for i, s := range sizes {
			if y[i] < -1e-9 {
				t.Fatalf("price %v for %d is negative", y[i], s)
			}
			lp += demand[i] * y[i]
			size += demand[i] * float64(s) / 1000
			if s > 500 {
				over += demand[i]
			}
			for range counts[i] {
				items = append(items, s)
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(items)))
		var bins []int // free milli per bin, first fit decreasing
	next:
		for _, s := range items {
			for b := range bins {
				if bins[b] >= s {
					bins[b] -= s
					continue next
				}
			}
			bins = append(bins, 1000-s)
		}
		if lp < size-1e-6 || lp < over-1e-6 || lp > float64(len(bins))+1e-6 {
			t.Fatalf("the LP charges %v GPUs; want at least %v (size) and %v (over half), at most %d (first fit decreasing)",
				lp, size, over, len(bins))
		}
	})
}

// FGD asks only whether the next request fits: with whole-GPU work
// about, it puts a 320 beside a 470 (530 free, 210 left that nothing here
// uses) rather than break a free GPU. The placer keeps the 530 for the
// next 470 and opens a GPU the next 650 will complete.
func TestSharePlacerLooksPastTheNextRequest(t *testing.T) {
	mix := append(fractions(470, 0.2, 650, 0.1, 320, 0.1), ShareType{GPUs: 1, GPUMilli: 1000, P: 0.6})
	pl := NewSharePlacer(mix)
	node := func(free ...int) ShareNode {
		return ShareNode{Model: "H100", CPUFree: 64000, MemFree: 1 << 20, Free: free}
	}
	share := func(m int) ShareRequest { return ShareRequest{GPUs: 1, GPUMilli: m} }

	n := node(530, 1000)
	if _, g := pl.Score(n, share(320)); g != 1 {
		t.Fatalf("a 320 went to GPU %d: want the free GPU 1, keeping 530 for a 470", g)
	}
	// The one-request-ahead view alone would have filled the 530.
	beside, fresh := node(210, 1000), node(530, 680)
	if mix.Fragmentation(beside) >= mix.Fragmentation(fresh) {
		t.Fatalf("fragmentation %v beside the 470, %v on a fresh GPU: the test no longer shows FGD's choice",
			mix.Fragmentation(beside), mix.Fragmentation(fresh))
	}
	if _, g := pl.Score(n, share(470)); g != 0 {
		t.Fatalf("a 470 went to GPU %d: want GPU 0, beside the other 470", g)
	}
	if _, g := pl.Score(node(530, 350, 1000), share(320)); g != 1 {
		t.Fatalf("a 320 went to GPU %d: want GPU 1, beside the 650", g)
	}
	// Across nodes too: the node where the share completes a GPU wins.
	a, _ := pl.Score(node(530, 0), share(320))
	b, _ := pl.Score(node(1000, 0), share(320))
	if a >= b {
		t.Fatalf("a 320 scores %v beside a 470 and %v on a fresh GPU: want the fresh GPU", a, b)
	}
}

// BenchmarkGapValues solves the LP for openb's fractions (the default
// trace's 20 sizes and their counts), uncached, as the first pass over a
// new mix does.
func BenchmarkGapValues(b *testing.B) {
	counts := map[int]float64{50: 7, 110: 24, 140: 1, 160: 74, 220: 62, 230: 140, 270: 4, 290: 1, 320: 328, 330: 7,
		350: 6, 370: 47, 440: 2, 460: 128, 470: 750, 480: 19, 550: 72, 590: 75, 650: 253, 810: 1078}
	var mix ShareMix
	for s, c := range counts {
		mix = append(mix, ShareType{GPUs: 1, GPUMilli: s, P: c})
	}
	sizes, demand := fractionDemand(mix)
	for b.Loop() {
		solveGapValues(sizes, demand)
	}
}

func TestClaims(t *testing.T) {
	mix := ShareMix{
		{GPUs: 1, GPUMilli: 1000, Models: []string{"T4"}, P: 0.2},
		{GPUs: 1, GPUMilli: 500, Models: []string{"A10", "T4"}, P: 0.1},
		{GPUs: 2, GPUMilli: 1000, Models: []string{"A10"}, P: 0.1},
		{GPUs: 1, GPUMilli: 1000, P: 0.6},
	}
	want := map[string]float64{"T4": 0.2*1000 + 0.1*250, "A10": 0.1*250 + 0.1*2000}
	if got := claims(mix); !cmp.Equal(got, want, cmpopts.EquateApprox(0, 1e-9)) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	if claims(ShareMix{{GPUs: 1, GPUMilli: 300, P: 1}}) != nil || NewSharePlacer(ShareMix{{GPUs: 1, GPUMilli: 300, P: 1}}).Scarce() {
		t.Fatal("a mix pinned to no model claims something")
	}
	pl := NewSharePlacer(mix)
	r := ShareRequest{GPUs: 1, GPUMilli: 1000}
	plenty, scarce := pl.Reserve("T4", 800000, r), pl.Reserve("T4", 8000, r)
	if plenty <= 0 || scarce != 100*plenty || pl.Reserve("G2", 8000, r) != 0 || pl.Reserve("T4", 0, r) != 0 {
		t.Fatalf("reserve on T4 with 800 GPUs free %v, with 8 free %v (want 100×), on an unclaimed model %v",
			plenty, scarce, pl.Reserve("G2", 8000, r))
	}
}

// Work that runs anywhere leaves the scarce model to the work pinned to
// it. Here a fifth of the requests need T4, of which there are 8, and
// three tenths G2, of which there are 32. FGD's gradient alone does the
// opposite: a T4 node's free GPUs count as fragmented for the G2 work,
// the larger part of the mix, so using them looks like a gain.
func TestReserveKeepsScarceModels(t *testing.T) {
	nodes := shareFleet("sharing", 0, 5, 8)
	nodes[0].Model = "T4"
	for i := range nodes[1:] {
		nodes[1+i].Model = "G2"
	}
	mix := ShareMix{
		{GPUs: 1, GPUMilli: 1000, Models: []string{"G2"}, P: 0.3},
		{GPUs: 1, GPUMilli: 1000, Models: []string{"T4"}, P: 0.2},
		{GPUs: 1, GPUMilli: 1000, P: 0.5},
	}
	pl := NewSharePlacer(mix)
	r := ShareRequest{GPUs: 1, GPUMilli: 1000}
	eight := []int{1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000}
	t4, _ := pl.Score(ShareNode{Model: "T4", CPUFree: nodes[0].CPUMilli, MemFree: nodes[0].MemoryMiB, Free: eight}, r)
	g2, _ := pl.Score(ShareNode{Model: "G2", CPUFree: nodes[1].CPUMilli, MemFree: nodes[1].MemoryMiB, Free: eight}, r)
	if t4 <= g2 {
		t.Fatalf("without the reserve a T4 node scores %v and a G2 node %v: the test no longer shows the gradient's pull", t4, g2)
	}
	pools := Pools{Small: "sharing", SmallMaxGPUs: 4}
	ix := NewIndex(nodes, nil, Config{Pools: pools})
	ix.SetMix(mix)
	any := wholeReq("any", 1)
	pl2, why := ix.Place(&any, pools)
	if why != nil || pl2.Parts[0].Node == nodes[0].ID {
		t.Fatalf("a job that runs on any model: %+v %v; want a G2 node, keeping the T4s", pl2, why)
	}
}
