package sim

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteHTML writes index.html and its PNG plots into dir: allocation and
// largest_placeable over time, queue-time CDFs by size class, and bars
// comparing the policies.
func (r *Report) WriteHTML(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var figs []figure
	add := func(name, title string, p *plot.Plot, err error) error {
		if err != nil {
			return err
		}
		if err := p.Save(9*vg.Inch, 4*vg.Inch, filepath.Join(dir, name)); err != nil {
			return err
		}
		figs = append(figs, figure{name, title})
		return nil
	}
	series := []struct {
		file, title, y string
		get            func(s Sample) float64
	}{
		{"allocation.png", "GPU allocation over time", "allocated %", func(s Sample) float64 { return s.AllocationPct }},
		{"largest_node.png", "largest_placeable (node) over time", "GPUs", func(s Sample) float64 { return float64(s.Largest.Node) }},
		{"largest_pod.png", "largest_placeable (pod) over time", "GPUs", func(s Sample) float64 { return float64(s.Largest.Pod) }},
		{"largest_any.png", "largest_placeable (any) over time", "GPUs", func(s Sample) float64 { return float64(s.Largest.Any) }},
		{"fragmented.png", "free GPUs no 8-GPU node job can use", "GPUs", func(s Sample) float64 { return float64(s.FragmentedGPUs) }},
	}
	ran := slices.ContainsFunc(r.Policies, func(m *Metrics) bool { return !m.Bound })
	for _, s := range series {
		if !ran {
			break // relaxation rows alone: no fleet sampled, nothing compared
		}
		p, err := r.timePlot(s.title, s.y, s.get)
		if err := add(s.file, s.title, p, err); err != nil {
			return err
		}
	}
	for i, c := range SizeClasses {
		if !r.hasQueue(c) || c == RigidClass && !r.hasQueue(ElasticClass) {
			continue // no job of that size: no plot (it was an empty -1..1 axis)
		}
		p, err := r.queueCDF(c)
		if err := add(fmt.Sprintf("queue_cdf_%d.png", i), "queue time CDF, "+c+" GPUs", p, err); err != nil {
			return err
		}
	}
	if ran {
		p, err := r.bars()
		if err := add("comparison.png", "policies compared", p, err); err != nil {
			return err
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return err
	}
	defer f.Close()
	return page.Execute(f, struct {
		R     *Report
		Table string
		Figs  []figure
	}{r, table.String(), figs})
}

type figure struct{ File, Title string }

var page = template.Must(template.New("report").Funcs(template.FuncMap{"mul100": func(x float64) float64 { return 100 * x }}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>berth sim: {{.R.Workload}}</title>
<style>body{font-family:sans-serif;max-width:1400px;margin:2em auto}pre{background:#f6f6f6;padding:1em;font-size:11px;overflow-x:auto}img{max-width:100%}</style>
</head><body>
<h1>berth sim: {{.R.Workload}} workload</h1>
<p>{{.R.Nodes}} nodes, {{.R.GPUs}} GPUs, {{printf "%.0f" .R.Hours}} simulated hours, seed {{.R.Seed}}. Topology penalty for tensor-parallel jobs spread over nodes: +{{printf "%.0f" (mul100 .R.Penalty)}}% step time.</p>
{{range .R.Notes}}<p><em>Note:</em> {{.}}</p>{{end}}
<pre>{{.Table}}</pre>
{{range .Figs}}<h2>{{.Title}}</h2><img src="{{.File}}" alt="{{.Title}}">{{end}}
</body></html>
`))

func (r *Report) timePlot(title, ylabel string, get func(Sample) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, "simulated hours", ylabel
	for _, m := range r.Policies {
		if m.Bound {
			continue // the relaxation has no fleet to sample
		}
		pts := make(plotter.XYs, len(m.Series))
		for k, s := range m.Series {
			pts[k].X, pts[k].Y = s.Hours, get(s)
		}
		if err := addLine(p, m.Policy, pts); err != nil {
			return nil, err
		}
	}
	legendRoom(p, len(r.Policies))
	return p, nil
}

// LegendRoom raises the y axis so that the legend (top right, one line
// per entry) sits above the data instead of over it. Every report's plots
// use it (internal/peer's too).
func LegendRoom(p *plot.Plot, entries int) { legendRoom(p, entries) }

func legendRoom(p *plot.Plot, entries int) {
	p.Legend.Top = true
	p.Y.Min = min(p.Y.Min, 0)
	p.Y.Max = p.Y.Min + (p.Y.Max-p.Y.Min)*(1+0.09*float64(entries))
}

// policyColors give every policy one colour in every plot of every
// report; berth's is the highlight no other policy uses.
var policyColors = map[string]color.RGBA{
	"berth":        {0xd6, 0x27, 0x28, 0xff}, // red, drawn thicker
	"best-fit":     {0x1f, 0x77, 0xb4, 0xff},
	"static-split": {0x2c, 0xa0, 0x2c, 0xff},
	"first-fit":    {0xff, 0x7f, 0x0e, 0xff},
	"worst-fit":    {0x94, 0x67, 0xbd, 0xff},
	"random":       {0x7f, 0x7f, 0x7f, 0xff},
	FluidName:      {0x17, 0xbe, 0xcf, 0xff}, // the relaxations are drawn dashed
	FluidSLOName:   {0xbc, 0xbd, 0x22, 0xff},
	FluidMatchName: {0xe3, 0x77, 0xc2, 0xff},
	BoundName:      {0x00, 0x00, 0x00, 0xff},
}

func policyColor(name string) color.Color {
	if c, ok := policyColors[name]; ok {
		return c
	}
	return color.RGBA{0x8c, 0x56, 0x4b, 0xff}
}

// addLine draws one policy's line in that policy's colour.
func addLine(p *plot.Plot, name string, pts plotter.XYs) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = policyColor(name)
	switch name {
	case "berth":
		l.Width = vg.Points(2.5)
	case BoundName, FluidName, FluidSLOName, FluidMatchName:
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func (r *Report) hasQueue(class string) bool {
	for _, m := range r.Policies {
		if len(m.queue[class]) > 0 {
			return true
		}
	}
	return false
}

func (r *Report) queueCDF(class string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = "queue time, "+class+" GPUs", "hours waited", "fraction of jobs"
	for _, m := range r.Policies {
		xs := append([]float64(nil), m.queue[class]...)
		if len(xs) == 0 {
			continue
		}
		sort.Float64s(xs)
		pts := make(plotter.XYs, len(xs))
		for k, x := range xs {
			pts[k].X, pts[k].Y = x, float64(k+1)/float64(len(xs))
		}
		if err := addLine(p, m.Policy, pts); err != nil {
			return nil, err
		}
	}
	legendRoom(p, len(r.Policies))
	return p, nil
}

func (r *Report) bars() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.Y.Label.Text = "allocation, effective throughput and inference SLO (%)", "%"
	metrics := []struct {
		name string
		get  func(m *Metrics) float64
	}{
		{"allocation", func(m *Metrics) float64 { return m.AllocationPct }},
		{"effective", func(m *Metrics) float64 { return m.EffectivePct }},
		{"capacity within 60s", func(m *Metrics) float64 { return m.CapacityWithin60sPct }},
	}
	w := vg.Points(12)
	var runs []*Metrics // the relaxation rows have none of these figures
	var names []string
	for _, m := range r.Policies {
		if !m.Bound {
			runs, names = append(runs, m), append(names, m.Policy)
		}
	}
	for k, mt := range metrics {
		vals := make(plotter.Values, len(runs))
		for i, m := range runs {
			vals[i] = mt.get(m)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(k)
		b.LineStyle.Color = color.Black
		b.Offset = w * vg.Length(k-1)
		p.Add(b)
		p.Legend.Add(mt.name, b)
	}
	p.NominalX(names...)
	// Headroom above 100% for the legend, so it never covers a bar.
	p.Y.Min, p.Y.Max = 0, 100
	legendRoom(p, len(metrics))
	return p, nil
}
