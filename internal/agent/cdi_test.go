package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/agent/gpu"
)

// TestCDIDevices: with a CDI spec on the node, a container gets exactly
// its GPUs as CDI devices, by UUID where the spec names them, by index
// otherwise; a spec that lacks one fails the start; no spec, no devices.
func TestCDIDevices(t *testing.T) {
	a := bareAgent(t)
	dir := t.TempDir()
	a.cfg.Container.CDIDirs = []string{dir}
	if devs, err := a.cdiDevices(0b101, nil); err != nil || devs != nil {
		t.Fatalf("no spec: %v, %v; want none", devs, err)
	}
	uuid0 := a.inv.Devices[0].UUID
	spec := "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"" + uuid0 + "\"\n- name: \"2\"\n- name: all\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another vendor's spec is not read as the GPUs'.
	if err := os.WriteFile(filepath.Join(dir, "other.json"), []byte(`{"cdiVersion":"0.5.0","kind":"vendor.com/nic","devices":[{"name":"1"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	devs, err := a.cdiDevices(0b101, nil)
	if err != nil || !slices.Equal(devs, []string{"nvidia.com/gpu=" + uuid0, "nvidia.com/gpu=2"}) {
		t.Fatalf("GPUs 0 and 2: %v, %v", devs, err)
	}
	if _, err := a.cdiDevices(0b010, nil); err == nil || !strings.Contains(err.Error(), "GPU 1") {
		t.Fatalf("GPU 1 is not in the spec: %v; want an error naming it", err)
	}
	mig := &gpu.MIGInstance{UUID: "MIG-absent"}
	if _, err := a.cdiDevices(0b1, mig); err == nil || !strings.Contains(err.Error(), "MIG-absent") {
		t.Fatalf("a MIG instance not in the spec: %v", err)
	}
}

// TestCDIMIGByIndex: a MIG instance the spec names by index (<gpu>:<n>)
// is found by its place on its GPU.
func TestCDIMIGByIndex(t *testing.T) {
	a := bareAgentWith(t, gpu.FakeConfig{GPUs: 2, MIG: map[int][]int{1: {3, 2, 2}}})
	dir := t.TempDir()
	a.cfg.Container.CDIDirs = []string{dir}
	spec := "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n- name: \"1:0\"\n- name: \"1:1\"\n- name: \"1:2\"\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	second := a.inv.Devices[1].MIG[1]
	devs, err := a.cdiDevices(0b10, &second)
	if err != nil || !slices.Equal(devs, []string{"nvidia.com/gpu=1:1"}) {
		t.Fatalf("MIG instance 1 of GPU 1: %v, %v", devs, err)
	}
}
