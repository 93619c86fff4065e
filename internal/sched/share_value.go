package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// What a shared GPU's free milli is worth, given the fractions that come.
//
// FGD's fragmentation looks one request ahead: it asks whether the next
// request could use a GPU's free milli. That is why it puts a 320-milli
// share beside a 470 (leaving 210 that almost nothing uses) rather than
// on a fresh GPU, where a 650 would later complete it to 970. Packing the
// fractions well is bin packing, and for bin packing under a known mix of
// sizes the linear program says what each size is worth: the dual prices
// y of the cutting-stock LP (Gilmore–Gomory), the most each size can be
// charged so that no GPU's worth of fractions costs more than one GPU. On
// openb they come out as 810 → 1, 650 → ⅔, 470 → ½, 320 → ⅓, 160 → 0:
// two 470s, or a 650 and a 320, fill a GPU; an 810 fills one alone.
//
// value[f], the most a GPU with f milli free can still collect at those
// prices (a knapsack), then prices every placement: putting a share of
// size s on a GPU with f free loses value[f] − y_s − value[f−s] ≥ 0, zero
// exactly when the placement is part of an optimal packing. The placer
// minimises that loss first (valueWeight) and fragmentation second. This
// is the primal-dual rule of Gupta and Radovanović, "Online Stochastic Bin
// Packing" (2012), whose loss over the optimum grows with the square root
// of the number of items rather than linearly.
//
// The LP is small (one variable per distinct fraction size, one
// constraint per packing pattern) and solved by cutting planes: start
// from one pattern per size, solve for y with gonum's simplex, find the
// pattern the prices undercharge most by a knapsack over the milli of one
// GPU, add it, repeat until none is undercharged (optimality). The values
// depend only on the sizes and their frequencies, so they are memoised:
// the planner asks for them on every pass and the mix rarely changes.

// valueWeight weighs the loss of GPU value (in milli of one GPU) against
// the cost's fragmentation: high enough that the loss decides whenever
// it differs and fragmentation breaks the ties. On openb anything from
// 10 to 100 gives the same packing within 0.05 points; docs/sharing.md
// has the sweep.
const valueWeight = 16

// gapValue is value[f] for f = 0..1000: what a GPU with f milli free can
// still hold of the mix's fractions, in GPUs. Nil when the mix has no
// fraction (every GPU is then worth its whole GPUs and nothing else).
type gapValue []float64

var gapValues = struct {
	sync.Mutex
	m map[string]gapValue
}{m: map[string]gapValue{}}

// gapValuesOf returns the mix's gap values, memoised by its fraction
// sizes and their frequencies to a percent. The prices are piecewise
// constant in the frequencies, so the rounding rarely moves them, and it
// lets a planner whose mix drifts by a job or two reuse the last solve.
func gapValuesOf(mix ShareMix) gapValue {
	sizes, demand := fractionDemand(mix)
	if len(sizes) == 0 {
		return nil
	}
	var key strings.Builder
	for i, s := range sizes {
		pct := math.Round(demand[i] * 100)
		demand[i] = pct / 100 // solve what the key says: the same mix, the same values, whoever asked first
		fmt.Fprintf(&key, "%d:%g,", s, pct)
	}
	gapValues.Lock()
	v, ok := gapValues.m[key.String()]
	gapValues.Unlock()
	if ok {
		return v
	}
	v, _ = solveGapValues(sizes, demand)
	gapValues.Lock()
	if len(gapValues.m) >= 256 { // a bound, not an LRU: mixes are few
		clear(gapValues.m)
	}
	gapValues.m[key.String()] = v
	gapValues.Unlock()
	return v
}

// fractionDemand is the mix's fraction sizes, ascending, and each size's
// share of the fractions.
func fractionDemand(mix ShareMix) ([]int, []float64) {
	by := map[int]float64{}
	var total float64
	for _, t := range mix {
		if t.GPUs == 1 && t.GPUMilli > 0 && t.GPUMilli < 1000 && t.P > 0 {
			by[t.GPUMilli] += t.P
			total += t.P
		}
	}
	sizes := make([]int, 0, len(by))
	for s := range by {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	demand := make([]float64, len(sizes))
	for i, s := range sizes {
		demand[i] = by[s] / total
	}
	return sizes, demand
}

// solveGapValues solves the cutting-stock dual by cutting planes and
// returns the knapsack of its prices, and the prices. If the solver fails (it should
// not: the problem is bounded and y = 0 is feasible), the values fall
// back to the plain size bound, y_s = s/1000, under which every
// placement loses nothing and fragmentation alone decides.
func solveGapValues(sizes []int, demand []float64) (gapValue, []float64) {
	n := len(sizes)
	var patterns [][]float64
	for i, s := range sizes { // to start: each size alone, as many as fit
		p := make([]float64, n)
		p[i] = float64(1000 / s)
		patterns = append(patterns, p)
	}
	for range 200 {
		y, err := dualPrices(patterns, demand)
		if err != nil {
			break
		}
		v, best := knapsack(sizes, y)
		if v[1000] <= 1+1e-9 {
			return v, y
		}
		patterns = append(patterns, best)
	}
	y := make([]float64, n)
	for i, s := range sizes {
		y[i] = float64(s) / 1000
	}
	v, _ := knapsack(sizes, y)
	return v, y
}

// dualPrices solves max Σ demand·y subject to pattern·y ≤ 1 for every
// pattern, y ≥ 0, in gonum's standard form (slacks make the start basis).
func dualPrices(patterns [][]float64, demand []float64) ([]float64, error) {
	n, k := len(demand), len(patterns)
	A := mat.NewDense(k, n+k, nil)
	c := make([]float64, n+k)
	b := make([]float64, k)
	basic := make([]int, k)
	for j := range n {
		c[j] = -demand[j]
	}
	for r, p := range patterns {
		for j, a := range p {
			A.Set(r, j, a)
		}
		A.Set(r, n+r, 1)
		b[r], basic[r] = 1, n+r
	}
	_, x, err := lp.Simplex(c, A, b, 1e-10, basic)
	if err != nil {
		return nil, err
	}
	return x[:n], nil
}

// knapsack returns, for every f in 0..1000, the most the prices y collect
// from sizes fitting in f milli (each size any number of times), and the
// pattern that collects value[1000].
func knapsack(sizes []int, y []float64) (gapValue, []float64) {
	v := make(gapValue, 1001)
	choice := make([]int, 1001)
	for f := 1; f <= 1000; f++ {
		v[f], choice[f] = v[f-1], -1
		for j, s := range sizes {
			if s <= f && v[f-s]+y[j] > v[f]+1e-12 {
				v[f], choice[f] = v[f-s]+y[j], j
			}
		}
	}
	pattern := make([]float64, len(sizes))
	for f := 1000; f > 0; {
		if choice[f] < 0 {
			f--
			continue
		}
		pattern[choice[f]]++
		f -= sizes[choice[f]]
	}
	return v, pattern
}

// spent is the value a share of s milli takes from a GPU with f free,
// in milli of one GPU: what the GPU could hold before, less what it can
// hold after. Across the GPUs a share could go to, this differs from the
// loss only by the share's own price, the same everywhere. It is rounded
// to a billionth so that placements losing the same value (a third plus a
// third against two thirds) tie exactly, and fragmentation decides
// between them rather than floating-point noise.
func (v gapValue) spent(f, s int) float64 {
	if v == nil {
		return 0
	}
	return 1000 * math.Round((v[f]-v[f-s])*1e9) / 1e9
}
