package peer

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Report is the comparison: one column per system over one workload.
type Report struct {
	Workload    string     `json:"workload"`
	Seed        uint64     `json:"seed"`
	Nodes       int        `json:"nodes"`
	GPUs        int        `json:"gpus"`
	Hours       float64    `json:"simulated_hours"`
	Compression float64    `json:"compression"`
	Jobs        int        `json:"jobs"`
	Notes       []string   `json:"notes"`
	Systems     []*Summary `json:"systems"`
	runs        []*Run
}

// Add puts a live run's column in the report.
func (r *Report) Add(run *Run) {
	r.runs = append(r.runs, run)
	r.Systems = append(r.Systems, Summarise(run))
	for _, e := range run.FirstErrs {
		r.Notes = append(r.Notes, run.System+": "+e)
	}
}

// WriteJSON writes the report (series included).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable is what a person reads in a terminal.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "workload %s: %d nodes, %d GPUs, %.1f simulated hours at %gx (%.1f real minutes), %d jobs, seed %d\n\n",
		r.Workload, r.Nodes, r.GPUs, r.Hours, r.Compression, r.Hours*60/r.Compression, r.Jobs, r.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(s *Summary) string) {
		cells := []string{name}
		for _, s := range r.Systems {
			cells = append(cells, f(s))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	row("", func(s *Summary) string { return s.System })
	for _, c := range Classes {
		row("queue h p50/p90 "+c+" GPUs", func(s *Summary) string {
			p, ok := s.Queue[c]
			if !ok || p.Count == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f/%.2f", p.P50, p.P90)
		})
	}
	row("largest_placeable node (avg GPUs)", func(s *Summary) string { return fmt.Sprintf("%.1f", s.LargestNode) })
	row("largest_placeable pod (avg GPUs)", func(s *Summary) string { return fmt.Sprintf("%.0f", s.LargestPod) })
	row("fully free nodes (avg)", func(s *Summary) string { return fmt.Sprintf("%.1f", s.FreeNodes) })
	row("GPU allocation %", func(s *Summary) string { return fmt.Sprintf("%.1f", s.AllocationPct) })
	row("node jobs spread over nodes", func(s *Summary) string { return fmt.Sprint(s.Spanning) })
	row("preemptions", func(s *Summary) string { return fmt.Sprint(s.Preemptions) })
	row("GPU-h lost to preemption", func(s *Summary) string { return fmt.Sprintf("%.1f", s.LostGPUHours) })
	row("inference short of demand %", func(s *Summary) string { return fmt.Sprintf("%.2f", s.ReplicasShortPct) })
	row("jobs done / never started", func(s *Summary) string { return fmt.Sprintf("%d / %d", s.Completed, s.NeverStarted) })
	row("errors from the system", func(s *Summary) string { return fmt.Sprint(s.Refused) })
	row("slowest poll (real s)", func(s *Summary) string { return fmt.Sprintf("%.1f", s.SlowestPoll) })
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}

// WriteJobs writes one CSV per live system into dir: every run of every
// job, where its GPUs were (node:indices) and how often it was
// preempted. It is the evidence behind the table's rows.
func (r *Report) WriteJobs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, run := range r.runs {
		f, err := os.Create(filepath.Join(dir, "jobs-"+strings.NewReplacer(" --", "-", " ", "-").Replace(run.System)+".csv"))
		if err != nil {
			return err
		}
		w := csv.NewWriter(f)
		_ = w.Write([]string{"job", "gpus", "topology", "submit_h", "run", "start_h", "end_h", "preemptions", "state", "placement"})
		for _, j := range run.Jobs {
			base := []string{j.Spec.ID, fmt.Sprint(j.Spec.Shape.GPUs), string(j.Spec.Shape.Topology), fmt.Sprintf("%.3f", j.Submitted.Hours())}
			if len(j.Runs) == 0 {
				_ = w.Write(append(base, "", "", "", fmt.Sprint(j.Preemptions), j.State.String(), ""))
			}
			for k, sp := range j.Runs {
				_ = w.Write(append(append([]string(nil), base...), fmt.Sprint(k+1), fmt.Sprintf("%.3f", sp.Start.Hours()), fmt.Sprintf("%.3f", sp.End.Hours()),
					fmt.Sprint(j.Preemptions), j.State.String(), sp.Placement))
			}
		}
		w.Flush()
		if err := w.Error(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
