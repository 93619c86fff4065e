package peer

import (
	"bytes"
	"html/template"
	"image/color"
	"os"
	"path/filepath"
	"sort"

	"github.com/berthsched/berth/internal/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WriteHTML writes index.html, its plots (PNG, in `berth sim`'s report
// style) and the per-job CSVs into dir.
func (r *Report) WriteHTML(dir string) error {
	if err := r.WriteJobs(dir); err != nil {
		return err
	}
	type fig struct{ File, Title string }
	var figs []fig
	save := func(file, title string, p *plot.Plot) error {
		if err := p.Save(9*vg.Inch, 4*vg.Inch, filepath.Join(dir, file)); err != nil {
			return err
		}
		figs = append(figs, fig{file, title})
		return nil
	}
	series := []struct {
		file, title, y string
		get            func(p Point) float64
		live           bool // the simulator has no such series
	}{
		{"largest_pod.png", "largest_placeable (pod) over time", "GPUs", func(p Point) float64 { return float64(p.Largest.Pod) }, false},
		{"largest_node.png", "largest_placeable (node) over time", "GPUs", func(p Point) float64 { return float64(p.Largest.Node) }, false},
		{"free_nodes.png", "fully free nodes over time", "nodes", func(p Point) float64 { return float64(p.FreeNodes) }, false},
		{"allocated.png", "GPUs allocated over time", "GPUs", func(p Point) float64 { return float64(p.AllocatedGPUs) }, false},
		{"pending.png", "training jobs pending over time", "jobs", func(p Point) float64 { return float64(p.Pending) }, false},
		{"short.png", "inference replicas short of demand over time", "replicas", func(p Point) float64 { return float64(p.Short) }, true},
	}
	for _, s := range series {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = s.title, "simulated hours", s.y
		n := 0
		for _, sys := range r.Systems {
			if s.live && sys.System == "berth sim" {
				continue
			}
			pts := make(plotter.XYs, len(sys.Series))
			for k, pt := range sys.Series {
				pts[k].X, pts[k].Y = pt.Hours, s.get(pt)
			}
			if err := line(p, sys.System, pts); err != nil {
				return err
			}
			n++
		}
		sim.LegendRoom(p, n)
		if err := save(s.file, s.title, p); err != nil {
			return err
		}
	}
	for i, c := range Classes {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = "queue time, "+c+" GPUs", "hours waited", "fraction of jobs"
		n := 0
		for _, sys := range r.Systems {
			xs := append([]float64(nil), sys.queue[c]...)
			if len(xs) == 0 {
				continue
			}
			sort.Float64s(xs)
			pts := make(plotter.XYs, len(xs))
			for k, x := range xs {
				pts[k].X, pts[k].Y = x, float64(k+1)/float64(len(xs))
			}
			if err := line(p, sys.System, pts); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			continue
		}
		sim.LegendRoom(p, n)
		if err := save("queue_cdf_"+string(rune('0'+i))+".png", "queue time CDF, "+c+" GPUs (live systems)", p); err != nil {
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
		Figs  []fig
	}{r, table.String(), figs})
}

var page = template.Must(template.New("peer").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>berth bench slurm: {{.R.Workload}}</title>
<style>body{font-family:sans-serif;max-width:1400px;margin:2em auto}pre{background:#f6f6f6;padding:1em;font-size:11px;overflow-x:auto}img{max-width:100%}</style>
</head><body>
<h1>Slurm and berth, live, on the {{.R.Workload}} workload</h1>
<p>{{.R.Nodes}} nodes, {{.R.GPUs}} GPUs, {{printf "%.1f" .R.Hours}} simulated hours at {{.R.Compression}}x, seed {{.R.Seed}}. The same jobs, submitted at the same compressed times, running the same stand-in training process; each system measured from outside by the same polls. "berth sim" is the simulator on the same workload. Every job's runs and GPU placement: jobs-slurm.csv, jobs-berth.csv.</p>
<pre>{{.Table}}</pre>
{{range .Figs}}<h2>{{.Title}}</h2><img src="{{.File}}" alt="{{.Title}}">{{end}}
</body></html>
`))

// systemColors: berth's red is the one `berth sim` reports use.
var systemColors = map[string]color.RGBA{
	"berth":        {0xd6, 0x27, 0x28, 0xff},
	"slurm":        {0x1f, 0x77, 0xb4, 0xff},
	"slurm --gpus": {0x2c, 0xa0, 0x2c, 0xff},
	"berth sim":    {0x7f, 0x7f, 0x7f, 0xff},
}

func line(p *plot.Plot, name string, pts plotter.XYs) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = systemColors[name]
	if name == "berth sim" {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}
