package peer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sim"
)

// berthBin is the real berth binary, built once: the jobs of both
// systems run its `workload train`.
var berthBin string

func TestMain(m *testing.M) {
	// The in-process agents run workloads through a shim that is this
	// binary run again (internal/agent/shim.go).
	agent.MaybeShim()
	dir, err := os.MkdirTemp("", "peer-test-")
	if err != nil {
		panic(err)
	}
	berthBin = filepath.Join(dir, "berth")
	build := exec.Command("go", "build", "-o", berthBin, "github.com/berthsched/berth/cmd/berth")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "peer tests: cannot build berth:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// full is four 8-GPU nodes in two pods filled by three training jobs at
// once (a 16-GPU pod gang and two 8-GPU node jobs), a 1-GPU job that
// must wait, and a service that wants one 8-GPU replica from minute 10:
// only a preemption can serve it.
func full() *sim.Workload {
	w := &sim.Workload{Name: "full", Horizon: 50 * time.Minute}
	for i := range 4 {
		w.Nodes = append(w.Nodes, model.Node{ID: fmt.Sprintf("n%03d", i), Pod: fmt.Sprintf("pod-%c", 'a'+i/2), GPUs: 8, Model: "H100",
			CPUMilli: 128000, MemoryMiB: 1 << 20, Health: model.HealthHealthy, BootEpoch: 1})
	}
	job := func(id string, gpus int, topo model.Topology, submit, work time.Duration) sim.JobSpec {
		return sim.JobSpec{ID: id, Submit: submit, Work: work, Shape: model.Shape{GPUs: gpus, Topology: topo}, Team: "research",
			Priority: 50, Preemptible: true, CheckpointBytes: 1e9, DurableEvery: 5 * time.Minute}
	}
	w.Jobs = []sim.JobSpec{
		job("gang", 16, model.TopologyPod, 0, 40*time.Minute),
		job("node-a", 8, model.TopologyNode, 0, 40*time.Minute),
		job("node-b", 8, model.TopologyNode, 0, 40*time.Minute),
		job("sweep", 1, model.TopologyNode, 2*time.Minute, 5*time.Minute),
	}
	w.Services = []sim.ServiceSpec{{ID: "chat", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}, Min: 0, Max: 1, Priority: 1000,
		Demand: []sim.DemandPoint{{At: 0, Replicas: 0}, {At: 10 * time.Minute, Replicas: 1}}}}
	return w
}

// checkRun holds both live systems to what the workload makes certain.
func checkRun(t *testing.T, r *Run, w *sim.Workload) {
	t.Helper()
	if r.Errors > 0 {
		t.Errorf("%s: %d errors: %q", r.System, r.Errors, r.FirstErrs)
	}
	pods := map[string]string{}
	for _, n := range w.Nodes {
		pods[n.ID] = n.Pod
	}
	preempted := 0
	for _, j := range r.Jobs {
		if len(j.Runs) == 0 {
			t.Errorf("%s: %s never started", r.System, j.Spec.ID)
			continue
		}
		for _, sp := range j.Runs {
			if sp.Start == sp.End && sp.End != 0 {
				continue // a run between two polls: never seen placed
			}
			var nodes []string
			gpus := 0
			for _, part := range strings.Fields(sp.Placement) {
				node, idx, ok := strings.Cut(part, ":")
				m, err := model.ParseGPUMask(idx)
				if !ok || err != nil {
					t.Fatalf("%s: %s: placement %q is not node:indices", r.System, j.Spec.ID, sp.Placement)
				}
				nodes = append(nodes, node)
				gpus += m.Count()
			}
			if gpus != j.Spec.Shape.GPUs {
				t.Errorf("%s: %s ran on %d GPUs (%q), asked %d", r.System, j.Spec.ID, gpus, sp.Placement, j.Spec.Shape.GPUs)
			}
			switch j.Spec.Shape.Topology {
			case model.TopologyNode:
				if len(nodes) != 1 {
					t.Errorf("%s: node job %s spread over %q", r.System, j.Spec.ID, sp.Placement)
				}
			case model.TopologyPod:
				for _, n := range nodes {
					if pods[n] != pods[nodes[0]] {
						t.Errorf("%s: pod gang %s spread over pods: %q", r.System, j.Spec.ID, sp.Placement)
					}
				}
			}
		}
		if j.Preemptions > 0 {
			preempted++
			if len(j.Runs) < 2 {
				t.Errorf("%s: %s preempted %d times but never ran again", r.System, j.Spec.ID, j.Preemptions)
			}
		}
	}
	if preempted == 0 {
		t.Errorf("%s: nothing was preempted, but the replica had nowhere else to go", r.System)
	}
	if last := r.Series[len(r.Series)-1]; last.Short != 0 {
		t.Errorf("%s: the replica was still short at the end: %+v", r.System, last)
	}
	if s := Summarise(r); s.Spanning != 0 || s.ReplicasShortPct <= 0 || s.ReplicasShortPct >= 50 {
		t.Errorf("%s: spanning %d, short %.1f%% (expected a little: the preemption takes time)", r.System, s.Spanning, s.ReplicasShortPct)
	}
}

// TestSlurmLive drives a real Slurm through the full fleet: a requeue
// for the replica, the preempted job resumed from its checkpoint, and
// the history it wrote read back by `berth sim`'s importer.
func TestSlurmLive(t *testing.T) {
	w := full()
	opt := Options{Compression: 60, Poll: 500 * time.Millisecond}
	dir := reachableDir(t)
	s, err := StartSlurm(context.Background(), SlurmConfig{Dir: dir, Nodes: w.Nodes, Berth: berthBin}, opt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Drive(context.Background(), s, w, opt)
	s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, w)
	// The preempted job's next run resumed from its checkpoint.
	outs, _ := filepath.Glob(filepath.Join(dir, "out", "*.out"))
	resumed := false
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		resumed = resumed || strings.Contains(string(b), "resumed from "+filepath.Join(dir, "ck"))
	}
	if !resumed {
		t.Errorf("no job output says it resumed from a checkpoint (%d outputs)", len(outs))
	}
	for _, hist := range []string{"sacct.txt", "jobcomp.log"} {
		hw, err := sim.LoadSlurm(filepath.Join(dir, hist), w.Nodes, sim.SlurmMapping{Inference: []string{"infer"}})
		if err != nil {
			t.Errorf("%s: %v", hist, err)
			continue
		}
		got := map[string]model.Shape{}
		for _, j := range hw.Jobs {
			got[j.ID[strings.IndexByte(j.ID, '-')+1:]] = j.Shape
		}
		for _, j := range w.Jobs {
			if g, ok := got[j.ID]; !ok || g.GPUs != j.Shape.GPUs || g.Topology != j.Shape.Topology {
				t.Errorf("%s: %s replayed as %+v (ok %v), submitted as %+v", hist, j.ID, g, ok, j.Shape)
			}
		}
		if len(hw.Services) == 0 || !slices.ContainsFunc(hw.Services, func(s sim.ServiceSpec) bool { return s.Shape.GPUs == 8 }) {
			t.Errorf("%s: the replica is not replayed as inference: %+v", hist, hw.Services)
		}
		if _, err := sim.Run(hw, mustPolicy(t), sim.Options{Seed: 1}); err != nil {
			t.Errorf("%s: the replay does not run: %v", hist, err)
		}
	}
}

// TestBerthLive is the same fleet through berth's dev stack.
func TestBerthLive(t *testing.T) {
	w := full()
	opt := Options{Compression: 60, Poll: 500 * time.Millisecond}
	var log *slog.Logger
	if os.Getenv("PEER_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	b, err := StartBerth(context.Background(), BerthConfig{Dir: t.TempDir(), Nodes: w.Nodes, Berth: berthBin, Workload: w, Logger: log}, opt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Drive(context.Background(), b, w, opt)
	b.Stop()
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, w)
}

// reachableDir is a fresh directory user munge can reach (t.TempDir's
// parent is private to root).
func reachableDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "peer-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func mustPolicy(t *testing.T) sim.Policy {
	p, err := sim.NewPolicy("berth", 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExpandHosts(t *testing.T) {
	for in, want := range map[string]string{
		"n000":                "n000",
		"n[000-002]":          "n000 n001 n002",
		"n[008,010-011],m1":   "n008 n010 n011 m1",
		"a[1-2],b[09-10]":     "a1 a2 b09 b10",
		"":                    "",
		"n[5-3]":              "n5-3",
		"pod-a-n[001-001],x2": "pod-a-n001 x2",
	} {
		if got := strings.Join(expandHosts(in), " "); got != want {
			t.Errorf("expandHosts(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSlurmFiles: the config names every node with its port and GPUs,
// every GPU as a device file, and one switch per pod.
func TestSlurmFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the fake GPUs are device files (mknod): run the tests as root, as CI does")
	}
	w := full()
	dir := t.TempDir()
	if err := slurmFiles(dir, w.Nodes, 7000, 7001, []int{7100, 7101, 7102, 7103}, "/run/x.sock", "/run/db.sock"); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	conf, gres, topo := read("slurm.conf"), read("gres.conf"), read("topology.conf")
	for _, want := range []string{"SlurmctldPort=7000", "AccountingStoragePort=7001", "NodeName=n003 NodeHostname=localhost Port=7103 CPUs=16 RealMemory=64000 Gres=gpu:8",
		"PartitionName=infer Nodes=n000,n001,n002,n003", "PriorityTier=10 PreemptMode=OFF", "AuthInfo=socket=/run/x.sock"} {
		if !strings.Contains(conf, want) {
			t.Errorf("slurm.conf lacks %q", want)
		}
	}
	if !strings.Contains(gres, "NodeName=n002 Name=gpu File="+dir+"/dev/n002/gpu[0-7]") {
		t.Errorf("gres.conf: %s", gres)
	}
	if topo != "SwitchName=pod-a Nodes=n000,n001\nSwitchName=pod-b Nodes=n002,n003\nSwitchName=top Switches=pod-a,pod-b\n" {
		t.Errorf("topology.conf: %q", topo)
	}
	st, err := os.Stat(filepath.Join(dir, "dev", "n001", "gpu7"))
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("gpu7 of n001: %v, %v: want a character device", st, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "slurmdbd.conf")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("slurmdbd.conf: %v %v: want mode 0600", st, err)
	}
}
