package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/agent"
	"github.com/berthsched/berth/internal/peer"
)

// TestMain lets this test binary be berth for the processes the bench
// starts: the jobs run `<this binary> workload train`, and the in-process
// agents' shim is this binary run again.
func TestMain(m *testing.M) {
	agent.MaybeShim()
	if len(os.Args) > 1 && os.Args[1] == "workload" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchSlurm is the short version of the documented comparison: half
// an hour of seed-small through a real Slurm, a real berth and the
// simulator, then the history Slurm wrote replayed by `berth sim`.
func TestBenchSlurm(t *testing.T) {
	dir, err := os.MkdirTemp("", "bench-slurm-") // munge must reach it: not t.TempDir
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report")
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"bench", "slurm", "--hours", "0.5", "--compression", "60", "--poll", "500ms", "--dir", filepath.Join(dir, "work"),
		"--report", report, "--format", "json"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("bench slurm: %v\n%s", err, errOut.String())
	}
	var rep peer.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bench slurm --format json: %v\n%s", err, out.String())
	}
	if len(rep.Systems) != 3 || rep.Jobs == 0 || rep.Nodes != 32 {
		t.Fatalf("report: %d systems, %d jobs, %d nodes", len(rep.Systems), rep.Jobs, rep.Nodes)
	}
	for _, s := range rep.Systems {
		if s.Submitted != rep.Jobs || s.Completed == 0 || s.Refused != 0 || s.Spanning != 0 || len(s.Series) == 0 {
			t.Errorf("%s: submitted %d of %d, completed %d, errors %d, spanning %d, %d points", s.System, s.Submitted, rep.Jobs,
				s.Completed, s.Refused, s.Spanning, len(s.Series))
		}
		if s.Queue["<64"].Count != rep.Jobs {
			t.Errorf("%s: %d queue times for %d jobs", s.System, s.Queue["<64"].Count, rep.Jobs)
		}
	}
	for _, f := range []string{"index.html", "largest_pod.png", "short.png", "jobs-slurm.csv", "jobs-berth.csv"} {
		if st, err := os.Stat(filepath.Join(report, f)); err != nil || st.Size() == 0 {
			t.Errorf("report %s: %v", f, err)
		}
	}
	// Every run Slurm started is placed on named GPUs.
	b, _ := os.ReadFile(filepath.Join(report, "jobs-slurm.csv"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	placed := 0
	for _, l := range lines[1:] {
		if strings.Contains(l, ":0") || strings.Contains(l, ":1") {
			placed++
		}
	}
	if placed == 0 {
		t.Errorf("jobs-slurm.csv has no placements:\n%s", b)
	}
	// The history Slurm wrote, replayed.
	sim, err := run(t, "sim", "run", "--workload", "slurm", "--sacct", filepath.Join(dir, "work", "slurm", "sacct.txt"),
		"--slurm-inference", "infer", "--policy", "berth,best-fit")
	if err != nil || !strings.Contains(sim, "workload slurm:") || !strings.Contains(sim, "best-fit") {
		t.Errorf("sim run --workload slurm: %v\n%s", err, sim)
	}
}
