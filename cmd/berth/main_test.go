package main

import (
	"bytes"
	"encoding/json"
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

func TestDevPlacesTheDemoMix(t *testing.T) {
	out, err := run(t, "dev", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var d sched.Decision
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("dev -o json is not a decision: %v\n%s", err, out)
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
	table, err := run(t, "dev", "--nodes", "4", "--pods", "1")
	if err != nil || !strings.Contains(table, "largest_placeable") || !strings.Contains(table, "PENDING") {
		t.Fatalf("a 4-node fleet cannot hold the mix; the table should say why:\n%s", table)
	}
}

func TestDevRejectsBadFlags(t *testing.T) {
	for args, field := range map[string]string{
		"--nodes 0":          "--nodes",
		"--pods 9 --nodes 4": "--pods",
		"--gpus-per-node 65": "--gpus-per-node",
		"-o yaml":            "--output",
	} {
		_, err := run(t, append([]string{"dev"}, strings.Fields(args)...)...)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("dev %s: error %v does not name %s", args, err, field)
		}
	}
}
