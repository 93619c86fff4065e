package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/sched"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "berth ") {
		t.Fatalf("version: %q, %v", out, err)
	}
}

func TestSimPlanPlacesTheDemoMix(t *testing.T) {
	out, err := run(t, "sim", "plan", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var d sched.Decision
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("sim plan -o json is not a decision: %v\n%s", err, out)
	}
	placed := map[string]int{}
	for _, b := range d.Binds {
		placed[b.OwnerID] += b.GPUs()
	}
	// 128 GPUs hold the whole mix: 6×4 + 4×1 inference, 32+8+16+12 training.
	if placed["pretrain-32"] != 32 || placed["chat-70b"] != 24 || placed["embed"] != 4 || len(d.Pending) != 0 {
		t.Fatalf("placed %v, pending %+v", placed, d.Pending)
	}
	if d.Topology.FreeGPUs != 128-96 || d.Topology.LargestPlaceable.Node != 8 {
		t.Fatalf("topology %+v", d.Topology)
	}
	table, err := run(t, "sim", "plan", "--nodes", "4", "--pods", "1")
	if err != nil || !strings.Contains(table, "largest_placeable") || !strings.Contains(table, "PENDING") {
		t.Fatalf("a 4-node fleet cannot hold the mix; the table should say why:\n%s", table)
	}
}

func TestSimPlanRejectsBadFlags(t *testing.T) {
	for args, field := range map[string]string{
		"--nodes 0":          "--nodes",
		"--pods 9 --nodes 4": "--pods",
		"--gpus-per-node 65": "--gpus-per-node",
		"-o yaml":            "--output",
	} {
		_, err := run(t, append([]string{"sim", "plan"}, strings.Fields(args)...)...)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("sim plan %s: error %v does not name %s", args, err, field)
		}
	}
}

func TestSimRunJSON(t *testing.T) {
	out, err := run(t, "sim", "run", "--days", "1", "--policy", "best-fit,berth", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Workload string `json:"workload"`
		GPUs     int    `json:"gpus"`
		Policies []struct {
			Policy        string  `json:"policy"`
			AllocationPct float64 `json:"allocation_pct"`
			Largest       struct {
				Node float64 `json:"node"`
			} `json:"largest_placeable_avg"`
			QueueHours map[string]struct {
				Count int `json:"count"`
			} `json:"queue_hours"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON (progress output must stay off pipes): %v\n%.300s", err, out)
	}
	if rep.Workload != "seed" || rep.GPUs != 1024 || len(rep.Policies) != 2 || rep.Policies[1].Policy != "berth" {
		t.Fatalf("report %+v", rep)
	}
	for _, p := range rep.Policies {
		if p.AllocationPct <= 0 || p.Largest.Node <= 0 || p.QueueHours["<8"].Count == 0 {
			t.Errorf("%s: %+v", p.Policy, p)
		}
	}
}

func TestSimErrorsNameTheFlag(t *testing.T) {
	for args, want := range map[string]string{
		"sim run --workload openb":                                        "--pods",
		"sim run --workload csv":                                          "--pods",
		"sim run --workload trace":                                        "seed, seed-correlated, seed-heavy, seed-heavy-elastic, seed-small, openb, csv",
		"sim run --policy best-fit,fastest":                               "--policy",
		"sim run --format xml":                                            "--format",
		"sim run --config /nonexistent.yaml":                              "nonexistent",
		"sim f8 --nodes 0":                                                "--nodes",
		"sim run --workload slurm":                                        "--sacct",
		"sim run --workload slurm --sacct /nonexistent.txt":               "nonexistent",
		"sim run --workload slurm --sacct main.go --slurm-multinode rack": "--slurm-multinode",
		"sim run --workload slurm --sacct main.go --slurm-time-scale -1":  "--slurm-time-scale",
		"bench slurm --compression 0":                                     "--compression",
		"bench slurm --systems slurm,pbs":                                 "--systems",
		"bench slurm --hours 0":                                           "--hours",
		"bench slurm --workload openb":                                    "--workload",
		"bench slurm --format xml":                                        "--format",
	} {
		_, err := run(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v does not mention %s", args, err, want)
		}
	}
}

func TestSimF8AndConfig(t *testing.T) {
	out, err := run(t, "sim", "f8", "--trials", "20")
	if err != nil || !strings.Contains(out, "0.50") || !strings.Contains(out, "berth") {
		t.Fatalf("f8: %v\n%s", err, out)
	}
	cfg, err := run(t, "sim", "config")
	if err != nil || !strings.Contains(cfg, "training_share") {
		t.Fatalf("config: %v", err)
	}
}

// TestSimPackingJSON: the JSON other tools script against: every policy,
// arrived percents "0" to "130" as keys, means and each seed's curve.
func TestSimPackingJSON(t *testing.T) {
	out, err := run(t, "sim", "packing", "--pods", "../../internal/sim/testdata/openb/pods-excerpt.csv",
		"--nodes", "../../internal/sim/testdata/openb/nodes-excerpt.csv", "--seeds", "42-43", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Policies map[string]struct {
			UnallocatedPctAt map[string]*float64            `json:"unallocated_pct_at"`
			PerSeed          map[string]map[string]*float64 `json:"per_seed"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, name := range []string{"random", "best-fit", "fgd", "berth"} {
		p, ok := rep.Policies[name]
		if !ok {
			t.Fatalf("no %s in %v", name, rep.Policies)
		}
		if len(p.UnallocatedPctAt) != 131 || p.UnallocatedPctAt["100"] == nil || p.UnallocatedPctAt["0"] == nil {
			t.Fatalf("%s: %d arrived keys, at 100: %v", name, len(p.UnallocatedPctAt), p.UnallocatedPctAt["100"])
		}
		if len(p.PerSeed) != 2 || p.PerSeed["42"]["100"] == nil {
			t.Fatalf("%s: per-seed curves %v", name, p.PerSeed)
		}
		if v := *p.UnallocatedPctAt["100"]; v < 0 || v > 100 {
			t.Fatalf("%s: %v%% unallocated", name, v)
		}
	}
	for args, field := range map[string]string{"--policy nope": "--policy", "--seeds x": "--seeds", "--tune 0": "--tune", "--format xml": "--format"} {
		_, err := run(t, append([]string{"sim", "packing", "--pods", "../../internal/sim/testdata/openb/pods-excerpt.csv",
			"--nodes", "../../internal/sim/testdata/openb/nodes-excerpt.csv"}, strings.Fields(args)...)...)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v does not name %s", args, err, field)
		}
	}
}

// TestAgentGPUs: `berth agent gpus` shows the inventory the agent would
// report, MIG instances included.
func TestAgentGPUs(t *testing.T) {
	out, err := run(t, "agent", "gpus", "--fake-gpus", "2", "--fake-model", "H200", "--fake-mig", "0=3,4", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var inv struct {
		Backend string `json:"backend"`
		Model   string `json:"model"`
		Devices []struct {
			UUID string `json:"uuid"`
			MIG  []struct {
				UUID   string `json:"uuid"`
				Slices int    `json:"slices"`
			} `json:"mig"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if inv.Backend != "fake" || inv.Model != "H200" || len(inv.Devices) != 2 || len(inv.Devices[0].MIG) != 2 ||
		inv.Devices[0].MIG[1].Slices != 4 || len(inv.Devices[1].MIG) != 0 {
		t.Fatalf("inventory %+v: want 2 fake H200s, GPU 0 as 3g+4g", inv)
	}
	table, err := run(t, "agent", "gpus", "--fake-gpus", "1", "--fake-mig", "0=7")
	if err != nil || !strings.Contains(table, "7g.") || !strings.Contains(table, "(1000m)") {
		t.Fatalf("table: %v\n%s", err, table)
	}
	for args, want := range map[string]string{"--fake-mig 0=1": "only with --fake-gpus", "--fake-gpus 1 --fake-mig 0=9": "--fake-mig", "--fake-gpus 1 -o xml": "--output"} {
		if _, err := run(t, append([]string{"agent", "gpus"}, strings.Fields(args)...)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", args, err, want)
		}
	}
}

// TestUnknownSubcommandsFail: a mistyped subcommand is an error (a
// non-zero exit), not the group's help and a zero exit.
func TestUnknownSubcommandsFail(t *testing.T) {
	for _, args := range [][]string{{"nosuch"}, {"job", "logz"}, {"deploy", "remove", "x"}, {"token", "rm"}, {"agent", "nope"}} {
		out, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "unknown command") {
			t.Errorf("berth %v: %v, output %q: want an unknown command error", args, err, out)
		}
	}
	if out, err := run(t, "job"); err != nil || !strings.Contains(out, "Usage:") {
		t.Errorf("berth job: %v %q: want its help", err, out)
	}
}

// TestConfigQuotasPerMode: a config file's quotas are berth kube's quota
// tree, refused by the server (whose quotas are in its table) and, in
// kube, refused for a scope that names a user; both before either
// connects to anything.
func TestConfigQuotasPerMode(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	team := write("team.yaml", "quotas:\n  - scope: ml/nlp\n    guaranteed_gpus: 8\n")
	user := write("user.yaml", "quotas:\n  - scope: ml/nlp/alice\n    guaranteed_gpus: 8\n")
	for args, want := range map[string]string{
		"server --config " + team: "PUT /v1/quotas",
		"kube --config " + user:   "quotas[0].scope",
	} {
		_, err := run(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one with %q", args, err, want)
		}
	}
}
