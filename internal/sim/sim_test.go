package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOpenBFixture(t *testing.T) {
	w, err := LoadOpenB("testdata/openb_pods_40.csv", "testdata/openb_nodes_20.csv")
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's first 40 pods: 30 LS and 8 other pods with GPUs
	// (7 BE, 1 Burstable), 14 of them fractional, 2 CPU-only.
	if len(w.Nodes) != 20 || len(w.Services) != 30 || len(w.Jobs) != 8 {
		t.Fatalf("nodes %d services %d jobs %d; want 20, 30, 8", len(w.Nodes), len(w.Services), len(w.Jobs))
	}
	notes := strings.Join(w.Notes, "\n")
	for _, want := range []string{"14 pods asked for a fraction of a GPU", "2 CPU-only pods", "LS pods are inference"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not say %q:\n%s", want, notes)
		}
	}
	shares := 0
	for _, j := range w.Jobs {
		if j.Shape.GPUs < 1 || j.Preemptible != (j.Team == "BE") || j.Work <= 0 {
			t.Errorf("job %+v: want GPUs, preemptible exactly when BE, positive work", j)
		}
		if j.Shape.Fraction() {
			shares++
		}
	}
	for _, s := range w.Services {
		if s.Shape.Fraction() {
			shares++
		}
	}
	if shares != 14 {
		t.Errorf("%d shapes keep their fraction of a GPU; want the fixture's 14", shares)
	}
	for _, n := range w.Nodes {
		if n.Pool != "sharing" {
			t.Fatalf("node %s is in pool %q: with shares in the trace every node is in the sharing pool", n.ID, n.Pool)
		}
	}
}

// On the openb fixture nothing contends, so every policy places
// everything. berth places the fractions as shares and the baselines
// give each a whole GPU: berth holds fewer GPUs for the same work.
func TestOpenBSharesHoldTheirFraction(t *testing.T) {
	w, err := LoadOpenB("testdata/openb_pods_40.csv", "testdata/openb_nodes_20.csv")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := NewReport(w, []string{"best-fit", "berth"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bf, b := rep.Policies[0], rep.Policies[1]
	if b.Policy != "berth" || bf.JobsCompleted != b.JobsCompleted || b.AllocationPct <= 0 || b.AllocationPct >= bf.AllocationPct {
		t.Fatalf("berth: %d jobs done, %.3f%% of GPUs allocated; best-fit %d, %.3f%%: want the same jobs done on fewer GPUs",
			b.JobsCompleted, b.AllocationPct, bf.JobsCompleted, bf.AllocationPct)
	}
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMalformedInputNamesFileLineAndField(t *testing.T) {
	nodes := writeFile(t, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,1024,8,H100\n")
	badNodes := writeFile(t, "badnodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,1024,eight,H100\n")
	podHeader := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	tests := []struct {
		name string
		load func() error
		want []string
	}{
		{"node gpu not a number", func() error { _, err := LoadNodes(badNodes, 32); return err }, []string{"badnodes.csv:2", "gpu", `"eight"`}},
		{"pods missing a column", func() error {
			_, err := LoadOpenB(writeFile(t, "p.csv", "name,cpu_milli\nx,1\n"), nodes)
			return err
		}, []string{"p.csv:1", "missing column"}},
		{"unknown qos", func() error {
			_, err := LoadOpenB(writeFile(t, "p.csv", podHeader+"p1,1000,10,1,1000,,Gold,Running,0,10,0\n"), nodes)
			return err
		}, []string{"p.csv:2", "qos", "LS, BE, Burstable, Guaranteed"}},
		{"gpu_milli out of range", func() error {
			_, err := LoadOpenB(writeFile(t, "p.csv", podHeader+"p1,1000,10,1,2000,,LS,Running,0,10,0\n"), nodes)
			return err
		}, []string{"p.csv:2", "gpu_milli"}},
		{"deleted before created", func() error {
			_, err := LoadOpenB(writeFile(t, "p.csv", podHeader+"p1,1000,10,1,1000,,LS,Running,50,10,0\n"), nodes)
			return err
		}, []string{"p.csv:2", "deletion_time"}},
		{"csv topology", func() error {
			_, err := LoadCSV(writeFile(t, "j.csv", "submit,duration,gpus,topology,kind,team,priority,model\n0,1h,8,node,training,a,1,\n0,1h,8,rack,training,a,1,\n"), nil)
			return err
		}, []string{"j.csv:3", "topology", "node, pod, any"}},
		{"csv kind", func() error {
			_, err := LoadCSV(writeFile(t, "j.csv", "submit,duration,gpus,topology,kind,team,priority,model\n0,1h,8,node,batch,a,1,\n"), nil)
			return err
		}, []string{"j.csv:2", "kind", "training, inference"}},
		{"csv duration", func() error {
			_, err := LoadCSV(writeFile(t, "j.csv", "submit,duration,gpus,topology,kind,team,priority,model\n0,soon,8,node,training,a,1,\n"), nil)
			return err
		}, []string{"j.csv:2", "duration"}},
		{"csv gpus", func() error {
			_, err := LoadCSV(writeFile(t, "j.csv", "submit,duration,gpus,topology,kind,team,priority,model\n0,1h,0,node,training,a,1,\n"), nil)
			return err
		}, []string{"j.csv:2", "gpus"}},
		{"yaml unknown field", func() error {
			_, err := LoadSeedConfig(writeFile(t, "c.yaml", "fleet:\n  podz: 3\n"))
			return err
		}, []string{"c.yaml:2", `"podz"`, "nodes_per_pod", "pods"}},
		{"yaml bad value", func() error {
			_, err := LoadSeedConfig(writeFile(t, "c.yaml", "days: -1\n"))
			return err
		}, []string{"days", "positive"}},
		{"unknown policy", func() error { _, err := NewPolicy("fastest", 1); return err }, []string{"fastest", "berth", "best-fit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.load()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestSeedConfigOverride(t *testing.T) {
	c, err := LoadSeedConfig(writeFile(t, "c.yaml", "days: 28\nfleet:\n  pods: 2\ninference:\n  services:\n    - {name: only, gpus: 8, min: 1, max: 40, share: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := Seed(c, 3)
	if len(w.Nodes) != 64 || len(w.Services) != 1 || w.Services[0].ID != "only" || w.Horizon != 28*24*time.Hour {
		t.Fatalf("nodes %d services %+v horizon %s", len(w.Nodes), w.Services, w.Horizon)
	}
	if c.Fleet.GPUsPerNode != 8 || len(c.Training.Classes) != 6 {
		t.Fatalf("defaults lost: %+v", c)
	}
	tr, inf := w.gpuHours()
	if share := tr / (tr + inf); share < 0.45 || share > 0.75 {
		t.Fatalf("training share of offered GPU-hours is %.2f, configured 0.6", share)
	}
}

// TestRunsAreRepeatable: the same workload, policy and seed give the same
// report, wall-clock figures aside.
func TestRunsAreRepeatable(t *testing.T) {
	c, _ := LoadSeedConfig("")
	c.Days = 2
	once := func() string {
		rep, err := NewReport(Seed(c, 7), PolicyNames, Options{Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Policies {
			m.WallSeconds, m.EventsPerSecond, m.SpeedUp = 0, 0, 0
		}
		var b bytes.Buffer
		rep.WriteJSON(&b)
		return b.String()
	}
	if a, b := once(), once(); a != b {
		t.Fatal("two runs of the same workload and seed differ")
	}
}

// TestTopologyPenalty: a topology-blind policy spreads a 6-GPU `node` job
// over two nodes and pays +52% runtime; best-fit and berth do not.
func TestTopologyPenalty(t *testing.T) {
	nodes, err := LoadNodes(writeFile(t, "n.csv", "sn,cpu_milli,memory_mib,gpu,model\na,64000,1024,8,H100\nb,64000,1024,8,H100\n"), 32)
	if err != nil {
		t.Fatal(err)
	}
	w, err := LoadCSV(writeFile(t, "j.csv", "id,submit,duration,gpus,topology,kind,team,priority,model\nfirst,0,10h,6,node,training,t,1,\nsecond,1s,10h,6,node,training,t,1,\n"), nodes)
	if err != nil {
		t.Fatal(err)
	}
	for policy, want := range map[string]float64{"first-fit": 15.2, "best-fit": 10, "berth": 10} {
		p, _ := NewPolicy(policy, 1)
		m, err := Run(w, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.CompletionHours.P99; got < want-0.01 || got > want+0.01 {
			t.Errorf("%s: slowest completion %.2f h, want %.1f h (stretched %d)", policy, got, want, m.StretchedJobs)
		}
	}
}

func TestF8Table(t *testing.T) {
	for _, r := range F8(128, 8, 100, 1) {
		if d := r.Random - r.Analytic; d > 0.3*r.Analytic+1 || d < -0.3*r.Analytic-1 {
			t.Errorf("f=%.2f: random placement %.2f, analytic %.2f", r.FreeFraction, r.Random, r.Analytic)
		}
		used := int(float64(1024)*(1-r.FreeFraction) + 0.5)
		if want := 128 - (used+7)/8; r.Berth != want {
			t.Errorf("f=%.2f: berth left %d fully free nodes, perfect packing is %d", r.FreeFraction, r.Berth, want)
		}
	}
}

func TestHTMLReport(t *testing.T) {
	c, _ := LoadSeedConfig("")
	c.Days = 1
	rep, err := NewReport(Seed(c, 1), []string{"best-fit", "berth"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := rep.WriteHTML(dir); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil || !strings.Contains(string(index), "largest_placeable") || !strings.Contains(string(index), "comparison.png") {
		t.Fatalf("index.html: %v\n%.500s", err, index)
	}
	for _, f := range []string{"allocation.png", "largest_node.png", "largest_pod.png", "largest_any.png", "queue_cdf_0.png", "comparison.png"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%d bytes, %v)", f, len(b), err)
		}
	}
	// A size class no job had gets no plot (it was an empty -1..1 axis).
	for i, c := range SizeClasses {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("queue_cdf_%d.png", i)))
		if has := rep.hasQueue(c) && (c != RigidClass || rep.hasQueue(ElasticClass)); has != (err == nil) {
			t.Errorf("class %s: jobs %v, plot written %v", c, has, err == nil)
		}
	}
	// One colour per policy; berth's is no other's.
	seen := map[color.RGBA]string{}
	for name, c := range policyColors {
		if o, dup := seen[c]; dup {
			t.Errorf("%s and %s share a colour", name, o)
		}
		seen[c] = name
	}
	for _, name := range DefaultPolicies {
		if _, ok := policyColors[name]; !ok {
			t.Errorf("policy %s has no fixed colour", name)
		}
	}
	var decoded Report
	var b bytes.Buffer
	rep.WriteJSON(&b)
	if err := json.Unmarshal(b.Bytes(), &decoded); err != nil || len(decoded.Policies) != 2 || decoded.Policies[1].Policy != "berth" {
		t.Fatalf("json: %v", err)
	}
}
