package sim

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// reducedPods is the default trace's first 20 rows with only the columns
// FGD's openb_pod_list_multigpu50.csv has (whose first 20 rows they are).
const reducedPods = "testdata/openb/pods-fgd-reduced.csv"

// TestOpenBReducedHeaderReplay: the replay takes the reduced header with
// the documented defaults: every GPU pod a Guaranteed training job (no
// qos), created at 0 in file order (no creation_time), never deleted (no
// deletion_time), so still running when the replay ends a day later; any
// GPU model (no gpu_spec).
func TestOpenBReducedHeaderReplay(t *testing.T) {
	w, err := LoadOpenB(reducedPods, excerptNodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Services) != 0 || len(w.Jobs) != 18 {
		t.Fatalf("services %d jobs %d; want 0 and the 18 GPU pods of 20", len(w.Services), len(w.Jobs))
	}
	if w.Horizon != 24*time.Hour {
		t.Fatalf("horizon %s; want 24h after the last creation (0)", w.Horizon)
	}
	for k, j := range w.Jobs {
		if j.Submit != 0 || j.Team != "Guaranteed" || j.Priority != 10 || j.Preemptible || j.CheckpointBytes != 0 ||
			j.Work != 24*time.Hour+time.Second || j.Shape.Models != nil {
			t.Errorf("job %d %+v: want submitted at 0, Guaranteed, priority 10, not preemptible, work 24h0m1s, any model", k, j)
		}
	}
	ids := []string{}
	for _, j := range w.Jobs {
		ids = append(ids, j.ID)
	}
	if ids[0] != "openb-pod-0000" || ids[1] != "openb-pod-0001" || ids[4] != "openb-pod-0004" || ids[5] != "openb-pod-0006" || ids[17] != "openb-pod-0019" {
		t.Errorf("jobs not in file order (CPU-only 0005 and 0016 left out): %v", ids)
	}
	if s := w.Jobs[1].Shape; s.CPUMilli != 6000 || s.MemoryMiB != 12288 || s.GPUs != 1 || s.GPUMilli != 460 {
		t.Errorf("openb-pod-0001: %+v; want 6000 cpu_milli, 12288 MiB, 460 milli of one GPU", s)
	}
	if s := w.Jobs[15].Shape; w.Jobs[15].ID != "openb-pod-0017" || s.GPUs != 8 || s.GPUMilli != 0 || s.CPUMilli != 88000 {
		t.Errorf("%s: %+v; want 8 whole GPUs, 88000 cpu_milli", w.Jobs[15].ID, s)
	}
	notes := strings.Join(w.Notes, "\n")
	for _, want := range []string{"gpu_spec (any GPU model)", "qos (Guaranteed, training)", "creation_time (every pod created at 0, in file order)",
		"scheduled_time (training runs from creation)", "deletion_time (never deleted)", "24h0m0s after the last creation"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not say %q:\n%s", want, notes)
		}
	}
	for _, present := range []string{"memory_mib (", "gpu_milli ("} {
		if strings.Contains(notes, present) {
			t.Errorf("notes give a default for %s, which the file has:\n%s", present, notes)
		}
	}
	rep, err := NewReport(w, []string{"best-fit", "berth"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Policies {
		if m.SimulatedHours != 24 || m.JobsCompleted != 0 || m.AllocationPct <= 0 {
			t.Errorf("%s: %.1f h simulated, %d jobs completed, %.2f%% allocated; want 24 h, none completed, some allocated",
				m.Policy, m.SimulatedHours, m.JobsCompleted, m.AllocationPct)
		}
	}
}

// TestPackingReducedHeader: the packing loader takes the reduced header
// (gpu_spec absent: any model) and the experiment runs on it.
func TestPackingReducedHeader(t *testing.T) {
	pods, err := LoadPackPods(reducedPods)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 20 {
		t.Fatalf("%d pods; want 20", len(pods))
	}
	want := map[int]PackPod{
		0:  {Name: "openb-pod-0000", CPUMilli: 12000, MemoryMiB: 16384, NumGPU: 1, GPUMilli: 1000},
		1:  {Name: "openb-pod-0001", CPUMilli: 6000, MemoryMiB: 12288, NumGPU: 1, GPUMilli: 460},
		5:  {Name: "openb-pod-0005", CPUMilli: 20000, MemoryMiB: 65536},
		17: {Name: "openb-pod-0017", CPUMilli: 88000, MemoryMiB: 327680, NumGPU: 8, GPUMilli: 1000},
	}
	for i, w := range want {
		if p := pods[i]; p.Name != w.Name || p.CPUMilli != w.CPUMilli || p.MemoryMiB != w.MemoryMiB || p.NumGPU != w.NumGPU || p.GPUMilli != w.GPUMilli || p.Models != nil {
			t.Errorf("pod %d: %+v; want %+v", i, p, w)
		}
	}
	nodes, err := LoadPackNodes(excerptNodes)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := packingPolicy("fgd", pods)
	if err != nil {
		t.Fatal(err)
	}
	list := PackingWorkload(pods, nodes, 1.3, 42)
	if got := RunPacking(nodes, list, pol, 42, 130); got.Placed == 0 || got.Placed+got.Failed != len(list) {
		t.Errorf("fgd on the reduced list: %d placed, %d failed of %d", got.Placed, got.Failed, len(list))
	}
}

// TestOpenBHeaderVariants: headers FGD's converter accepts load in both
// loaders, each absent column taking its documented default.
func TestOpenBHeaderVariants(t *testing.T) {
	nodes := writeFile(t, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,T4\n")
	tests := []struct {
		name, body string
		pod        PackPod // what the packing loader reads
		replay     func(t *testing.T, w *Workload)
	}{
		{"no memory_mib (openb_pod_list_nomem.csv)",
			"name,cpu_milli,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np1,12000,1,460,T4|,LS,Running,5,100,7\n",
			PackPod{Name: "p1", CPUMilli: 12000, NumGPU: 1, GPUMilli: 460, Models: []string{"T4"}},
			func(t *testing.T, w *Workload) {
				s := w.Services[0]
				if s.Shape.MemoryMiB != 0 || s.Shape.GPUMilli != 460 || !slices.Equal(s.Shape.Models, []string{"T4"}) ||
					!slices.Equal(s.Demand, []DemandPoint{{5 * time.Second, 1}, {100 * time.Second, 0}}) || w.Horizon != 0 {
					t.Errorf("service %+v, horizon %s; want no memory, 460 milli on a T4, up from 5s to 100s, no horizon", s, w.Horizon)
				}
			}},
		{"no gpu_milli",
			"name,cpu_milli,memory_mib,num_gpu\np1,4000,1024,2\n",
			PackPod{Name: "p1", CPUMilli: 4000, MemoryMiB: 1024, NumGPU: 2, GPUMilli: 1000},
			func(t *testing.T, w *Workload) {
				j := w.Jobs[0]
				if j.Shape.GPUs != 2 || j.Shape.GPUMilli != 0 || j.Team != "Guaranteed" {
					t.Errorf("job %+v; want 2 whole GPUs, Guaranteed", j)
				}
			}},
		{"job_id and cpu in cores, no memory_mib",
			"job_id,cpu,num_gpu\n7,2.5,1\n",
			PackPod{Name: "job-0007", CPUMilli: 2500, NumGPU: 1, GPUMilli: 1000},
			func(t *testing.T, w *Workload) {
				j := w.Jobs[0]
				if j.ID != "job-0007" || j.Shape.CPUMilli != 2500 || j.Team != "Burstable" || j.Preemptible {
					t.Errorf("job %+v; want job-0007, 2500 cpu_milli, Burstable (requests without memory), not preemptible", j)
				}
			}},
		{"name over job_id, cpu_milli over cpu",
			"name,job_id,cpu_milli,cpu,memory_mib,num_gpu\np1,7,1500,9,64,1\n",
			PackPod{Name: "p1", CPUMilli: 1500, MemoryMiB: 64, NumGPU: 1, GPUMilli: 1000},
			func(t *testing.T, w *Workload) {
				if j := w.Jobs[0]; j.ID != "p1" || j.Shape.CPUMilli != 1500 {
					t.Errorf("job %+v; want p1 with 1500 cpu_milli", j)
				}
			}},
		{"times but no deletion_time",
			"name,cpu_milli,memory_mib,num_gpu,gpu_milli,qos,creation_time,scheduled_time\np1,1000,10,1,1000,BE,100,160\np2,1000,10,1,500,LS,50,\n",
			PackPod{Name: "p1", CPUMilli: 1000, MemoryMiB: 10, NumGPU: 1, GPUMilli: 1000},
			func(t *testing.T, w *Workload) {
				end := 160*time.Second + 24*time.Hour
				j, s := w.Jobs[0], w.Services[0]
				if w.Horizon != end || j.Submit != 100*time.Second || !j.Preemptible || j.Work != end-100*time.Second+time.Second {
					t.Errorf("horizon %s, job %+v; want the horizon 24h after the last scheduling (160s), submitted at 100s, preemptible, running past the horizon", w.Horizon, j)
				}
				if !slices.Equal(s.Demand, []DemandPoint{{50 * time.Second, 1}}) {
					t.Errorf("service demand %v; want one replica from 50s, never scaled down", s.Demand)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := writeFile(t, "p.csv", tc.body)
			pp, err := LoadPackPods(pods)
			if err != nil {
				t.Fatalf("packing: %v", err)
			}
			w := tc.pod
			if p := pp[0]; p.Name != w.Name || p.CPUMilli != w.CPUMilli || p.MemoryMiB != w.MemoryMiB || p.NumGPU != w.NumGPU || p.GPUMilli != w.GPUMilli || !slices.Equal(p.Models, w.Models) {
				t.Errorf("packing read %+v; want %+v", p, w)
			}
			wl, err := LoadOpenB(pods, nodes)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			tc.replay(t, wl)
		})
	}
}

// TestOpenBNodesWithoutModel: a node list without model loads in both
// loaders, every node without a model.
func TestOpenBNodesWithoutModel(t *testing.T) {
	path := writeFile(t, "nodes.csv", "sn,cpu_milli,memory_mib,gpu\nn1,64000,1024,8\nn2,32000,512,0\n")
	nodes, err := LoadNodes(path, 32)
	if err != nil || len(nodes) != 1 || nodes[0].Model != "" || nodes[0].GPUs != 8 {
		t.Fatalf("LoadNodes: %+v, %v; want n1 with 8 GPUs and no model", nodes, err)
	}
	pn, err := LoadPackNodes(path)
	if err != nil || len(pn) != 1 || pn[0].Model != "" || pn[0].GPUs != 8 {
		t.Fatalf("LoadPackNodes: %+v, %v; want n1 with 8 GPUs and no model", pn, err)
	}
}

type openbLoader struct {
	name string
	load func(path string) error
}

func openbPodLoaders(t *testing.T) []openbLoader {
	nodes := writeFile(t, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,8,T4\n")
	return []openbLoader{
		{"replay", func(p string) error { _, err := LoadOpenB(p, nodes); return err }},
		{"packing", func(p string) error { _, err := LoadPackPods(p); return err }},
	}
}

var openbNodeLoaders = []openbLoader{
	{"LoadNodes", func(p string) error { _, err := LoadNodes(p, 32); return err }},
	{"LoadPackNodes", func(p string) error { _, err := LoadPackNodes(p); return err }},
}

// TestOpenBMissingRequiredColumn: a column FGD's converter cannot do
// without is still required, the error naming it (and its alternative).
func TestOpenBMissingRequiredColumn(t *testing.T) {
	pods := []struct{ body, col, lists string }{
		{"name,cpu_milli,memory_mib,gpu_milli\np,1000,10,1000\n", "num_gpu", "name (or job_id), cpu_milli (or cpu), num_gpu"},
		{"cpu_milli,memory_mib,num_gpu,gpu_milli\n1000,10,1,1000\n", "name", "name (or job_id)"},
		{"name,memory_mib,num_gpu,gpu_milli\np,10,1,1000\n", "cpu_milli", "cpu_milli (or cpu)"},
	}
	for _, l := range openbPodLoaders(t) {
		for _, c := range pods {
			path := writeFile(t, "p.csv", c.body)
			err := l.load(path)
			if err == nil || !strings.HasPrefix(err.Error(), path+`:1: missing column "`+c.col+`"`) || !strings.Contains(err.Error(), c.lists) {
				t.Errorf("%s, %q: error %v; want %s:1: missing column %q naming %s", l.name, c.body, err, path, c.col, c.lists)
			}
		}
	}
	nodeCases := []struct{ body, col string }{
		{"sn,cpu_milli,memory_mib,model\nn1,64000,1024,T4\n", "gpu"},
		{"cpu_milli,memory_mib,gpu,model\n64000,1024,8,T4\n", "sn"},
		{"sn,cpu_milli,gpu,model\nn1,64000,8,T4\n", "memory_mib"},
	}
	for _, l := range openbNodeLoaders {
		for _, c := range nodeCases {
			path := writeFile(t, "n.csv", c.body)
			if err := l.load(path); err == nil || !strings.HasPrefix(err.Error(), path+`:1: missing column "`+c.col+`"`) {
				t.Errorf("%s, %q: error %v; want %s:1: missing column %q", l.name, c.body, err, path, c.col)
			}
		}
	}
}

// TestOpenBBadOptionalValue: an optional column that is present is read
// and checked: a bad value fails naming the file, line and field.
func TestOpenBBadOptionalValue(t *testing.T) {
	full := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"p0,1000,10,1,1000,,LS,Running,0,10,0\n"
	byID := "job_id,cpu,memory_mib,num_gpu\n6,1,10,1\n"
	type badCase struct{ head, row, field, says string }
	both := []badCase{
		{full, "p1,1000,lots,1,1000,,LS,Running,0,10,0", "memory_mib", `"lots" is not a whole number`},
		{full, "p1,1000,10,1,half,,LS,Running,0,10,0", "gpu_milli", `"half" is not a whole number`},
		{byID, "seven,1,10,1", "job_id", `"seven" is not a whole number`},
		{byID, ",1,10,1", "job_id", "must not be empty"},
		{byID, "7,two,10,1", "cpu", `"two" is not a number of cores`},
	}
	replayOnly := []badCase{
		{full, "p1,1000,10,1,1000,,Gold,Running,0,10,0", "qos", `"Gold" is not one of LS, BE, Burstable, Guaranteed`},
		{full, "p1,1000,10,1,1000,,LS,Running,soon,10,0", "creation_time", `"soon" is not a whole number`},
		{full, "p1,1000,10,1,1000,,LS,Running,0,later,0", "deletion_time", `"later" is not a whole number`},
		{full, "p1,1000,10,1,1000,,BE,Running,0,10,x", "scheduled_time", `"x" is not a whole number`},
	}
	loaders := openbPodLoaders(t)
	check := func(l openbLoader, c badCase, name string) {
		t.Helper()
		path := writeFile(t, name, c.head+c.row+"\n")
		if err, want := l.load(path), path+":3: "+c.field+": "+c.says; err == nil || err.Error() != want {
			t.Errorf("%s: error %v; want %s", l.name, err, want)
		}
	}
	for _, l := range loaders {
		for _, c := range both {
			check(l, c, "p.csv")
		}
	}
	for _, c := range replayOnly {
		check(loaders[0], c, "p.csv")
	}
	for _, l := range openbNodeLoaders {
		check(l, badCase{"sn,cpu_milli,memory_mib,gpu\nn0,1000,10,8\n", "n1,1000,lots,8", "memory_mib", `"lots" is not a whole number`}, "n.csv")
	}
}
