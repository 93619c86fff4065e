package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is a run's result across policies; its JSON form is the stable
// contract documented in docs/sim.md.
type Report struct {
	Workload string     `json:"workload"`
	Seed     uint64     `json:"seed"`
	Nodes    int        `json:"nodes"`
	GPUs     int        `json:"gpus"`
	Hours    float64    `json:"simulated_hours"`
	Jobs     int        `json:"jobs"`
	Services int        `json:"services"`
	Penalty  float64    `json:"topology_penalty"`
	Notes    []string   `json:"notes"`
	Policies []*Metrics `json:"policies"`
}

// NewReport runs every policy over the workload.
func NewReport(w *Workload, policies []string, opt Options) (*Report, error) {
	rep := StartReport(w, opt)
	for _, name := range policies {
		if err := rep.Add(w, name, opt); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// StartReport is a report on w with no rows yet.
func StartReport(w *Workload, opt Options) *Report {
	opt = opt.withDefaults()
	rep := &Report{Workload: w.Name, Seed: opt.Seed, Nodes: len(w.Nodes), Services: len(w.Services),
		Penalty: opt.Penalty, Notes: w.Notes}
	for _, n := range w.Nodes {
		rep.GPUs += n.GPUs
	}
	return rep
}

// Add runs one policy (or computes one relaxation row) over w and adds
// its row. fluid-match reads MatchPolicy's row from the rows already
// added, so a caller adding rows one at a time (the command line, for
// its progress bar) runs best-fit once.
func (rep *Report) Add(w *Workload, name string, opt Options) error {
	opt = opt.withDefaults()
	var m *Metrics
	switch relax, ok := relaxations[name]; {
	case name == FluidMatchName:
		var err error
		if m, err = fluidMatch(w, opt, rep.Policies); err != nil {
			return err
		}
	case ok:
		m = relax(w, opt)
	default:
		p, err := NewPolicy(name, opt.Seed)
		if err != nil {
			return err
		}
		if m, err = Run(w, p, opt); err != nil {
			return err
		}
	}
	rep.Policies = append(rep.Policies, m)
	rep.Hours = max(rep.Hours, m.SimulatedHours)
	rep.Jobs = max(rep.Jobs, m.JobsSubmitted)
	return nil
}

// relaxations are the rows computed on a fluid pool, not run (bound.go).
// fluid-match is one too, but reads MatchPolicy's row (fluidMatch).
var relaxations = map[string]func(*Workload, Options) *Metrics{BoundName: Bound, FluidName: Fluid, FluidSLOName: FluidSLO}

// fluidMatch is the fluid-match row, against MatchPolicy's row among done
// when the report has one, else against a run of it made for the row
// alone (the report does not show it then).
func fluidMatch(w *Workload, opt Options, done []*Metrics) (*Metrics, error) {
	for _, m := range done {
		if m.Policy == MatchPolicy {
			return FluidMatch(w, opt, m), nil
		}
	}
	p, err := NewPolicy(MatchPolicy, opt.Seed)
	if err != nil {
		return nil, err
	}
	target, err := Run(w, p, opt)
	if err != nil {
		return nil, err
	}
	return FluidMatch(w, opt, target), nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the summary a person reads in a terminal.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "workload %s: %d nodes, %d GPUs, %.0f simulated hours, %d jobs, %d services, seed %d\n",
		r.Workload, r.Nodes, r.GPUs, r.Hours, r.Jobs, r.Services, r.Seed)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, m := range r.Policies {
		if m.Note != "" {
			fmt.Fprintf(w, "note (%s): %s\n", m.Policy, m.Note)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	// The relaxation rows fill only the queue times: "-" elsewhere.
	line := func(label string, bound bool, f func(m *Metrics) string) {
		cells := []string{label}
		for _, m := range r.Policies {
			if m.Bound && !bound {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, f(m))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	row := func(label string, f func(m *Metrics) string) { line(label, false, f) }
	line("", true, func(m *Metrics) string { return m.Policy })
	row("GPU allocation %", func(m *Metrics) string { return fmt.Sprintf("%.1f", m.AllocationPct) })
	row("effective (after topology) %", func(m *Metrics) string { return fmt.Sprintf("%.1f", m.EffectivePct) })
	row("largest_placeable node (avg)", func(m *Metrics) string { return fmt.Sprintf("%.1f", m.LargestPlaceable.Node) })
	row("largest_placeable pod (avg)", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.LargestPlaceable.Pod) })
	row("largest_placeable any (avg)", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.LargestPlaceable.Any) })
	row("fully free nodes (avg)", func(m *Metrics) string { return fmt.Sprintf("%.1f", m.FullyFreeNodes) })
	row("fragmented free GPUs (avg)", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.FragmentedGPUs) })
	for _, c := range SizeClasses {
		if (c == ElasticClass || c == RigidClass) && !r.hasQueue(ElasticClass) {
			continue
		}
		line("queue h p50/p90/p99 "+c+" GPUs", true, func(m *Metrics) string {
			q := m.QueueHours[c]
			if q.Count == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f/%.2f/%.2f", q.P50, q.P90, q.P99)
		})
	}
	row("jobs done / never started", func(m *Metrics) string { return fmt.Sprintf("%d / %d", m.JobsCompleted, m.JobsNeverStarted) })
	row("completion h mean/p50/p90", func(m *Metrics) string {
		return fmt.Sprintf("%.2f/%.1f/%.1f", m.CompletionHours.Mean, m.CompletionHours.P50, m.CompletionHours.P90)
	})
	row("TP jobs stretched by topology", func(m *Metrics) string { return fmt.Sprint(m.StretchedJobs) })
	row("inference capacity within 60s %", func(m *Metrics) string { return fmt.Sprintf("%.1f", m.CapacityWithin60sPct) })
	row("inference demand shed %", func(m *Metrics) string { return fmt.Sprintf("%.2f", m.DemandShedPct) })
	row("preemptions by class (<8/8-63/64-255/>=256)", func(m *Metrics) string {
		c := m.PreemptionsByClass
		return fmt.Sprintf("%d/%d/%d/%d", c["<8"], c["8-63"], c["64-255"], c[">=256"])
	})
	row("preemptions per hour", func(m *Metrics) string { return fmt.Sprintf("%.2f", m.PreemptionsPerHour) })
	row("GPU-h lost to preemption (% of training)", func(m *Metrics) string { return fmt.Sprintf("%.1f (%.2f%%)", m.LostGPUHours, m.LostPct) })
	row("kills at the deadline", func(m *Metrics) string { return fmt.Sprint(m.Kills) })
	row("elastic shrinks / grows", func(m *Metrics) string { return fmt.Sprintf("%d / %d", m.Shrinks, m.Grows) })
	row("repeat preemptions (% of all)", func(m *Metrics) string { return fmt.Sprintf("%d (%.1f%%)", m.Thrash, m.ThrashPct) })
	row("relocations (largest_placeable.node recovered)", func(m *Metrics) string {
		return fmt.Sprintf("%d (%+d)", m.Relocations, m.RelocationGain)
	})
	row("starvation alerts / pages", func(m *Metrics) string { return fmt.Sprintf("%d / %d", m.StarvationAlerts, m.Pages) })
	row("events/s", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.EventsPerSecond) })
	row("simulated s per wall s", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.SpeedUp) })
	return tw.Flush()
}
