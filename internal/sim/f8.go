package sim

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"text/tabwriter"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// F8Row is one line of §2's table.
type F8Row struct {
	FreeFraction float64 `json:"free_fraction"`
	Analytic     float64 `json:"analytic"` // nodes × f^gpus
	Random       float64 `json:"random"`   // Monte Carlo mean, random placement
	Berth        int     `json:"berth"`    // berth's placement of the same demand
	BerthLargest int     `json:"berth_largest_node"`
}

// F8 reproduces §2: expected fully free nodes when a fraction f of GPUs is
// free, analytically (n·f^g), by Monte Carlo of random placement, and with
// the same demand (1-GPU requests) placed by berth's core.
func F8(nodes, gpus, trials int, seed uint64) []F8Row {
	var rows []F8Row
	fleet := make([]model.Node, nodes)
	for i := range fleet {
		fleet[i] = model.Node{ID: fmt.Sprintf("n%03d", i), Pod: fmt.Sprintf("pod-%d", i/32), Model: "H100", GPUs: gpus, Health: model.HealthHealthy}
	}
	rng := rand.New(rand.NewPCG(seed, 0xf8))
	for _, f := range []float64{0.5, 0.6, 0.7, 0.8, 0.9, 0.95} {
		total := nodes * gpus
		used := int(math.Round(float64(total) * (1 - f)))
		row := F8Row{FreeFraction: f, Analytic: float64(nodes) * math.Pow(f, float64(gpus))}
		for t := 0; t < trials; t++ {
			perm := rng.Perm(total)[:used]
			busy := make([]bool, nodes)
			for _, g := range perm {
				busy[g/gpus] = true
			}
			for _, b := range busy {
				if !b {
					row.Random++
				}
			}
		}
		row.Random /= float64(max(trials, 1))
		ix := sched.NewIndex(fleet, nil, sched.Config{})
		req := model.Request{Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, Kind: model.OwnerTraining}
		for i := 0; i < used; i++ {
			ix.Place(&req, sched.Pools{})
		}
		s := ix.Summary(false)
		row.Berth, row.BerthLargest = s.FreeNodesFull, s.LargestPlaceable.Node
		rows = append(rows, row)
	}
	return rows
}

// WriteF8 prints the table.
func WriteF8(w io.Writer, nodes, gpus int, rows []F8Row) error {
	fmt.Fprintf(w, "§2: fully free %d-GPU nodes of %d when a fraction f of GPUs is free\n\n", gpus, nodes)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "free f\tanalytic n·f^g\trandom placement\tberth\tberth largest_placeable node\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%.2f\t%.2f\t%.2f\t%d\t%d\t\n", r.FreeFraction, r.Analytic, r.Random, r.Berth, r.BerthLargest)
	}
	return tw.Flush()
}
