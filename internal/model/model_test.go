package model

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestGPUMaskText(t *testing.T) {
	for _, s := range []string{"-", "0", "0-3", "0-3,6", "1,3,5,7", "0-15", "63"} {
		m, err := ParseGPUMask(s)
		if err != nil {
			t.Fatalf("ParseGPUMask(%q): %v", s, err)
		}
		if m.String() != s {
			t.Fatalf("ParseGPUMask(%q).String() = %q", s, m.String())
		}
	}
	for _, bad := range []string{"a", "3-1", "64", "0-64", "-1"} {
		if _, err := ParseGPUMask(bad); err == nil || !strings.Contains(err.Error(), "gpu_mask") {
			t.Fatalf("ParseGPUMask(%q) = %v, want an error naming gpu_mask", bad, err)
		}
	}
	b, _ := json.Marshal(Allocation{GPUs: MaskOf(0, 1, 2, 3)})
	if !strings.Contains(string(b), `"gpu_mask":"0-3"`) {
		t.Fatalf("allocation JSON %s does not carry the mask as 0-3", b)
	}
	var a Allocation
	if err := json.Unmarshal([]byte(`{"gpu_mask":"4-7"}`), &a); err != nil || a.GPUs != MaskOf(4, 5, 6, 7) {
		t.Fatalf("unmarshal: %v %v", a.GPUs, err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{(&Node{ID: "n1", GPUs: 0}).Validate(), "gpus"},
		{(&Node{ID: "", GPUs: 8}).Validate(), "id"},
		{(&Node{ID: "n1", GPUs: 8, QuarantinedGPUs: MaskOf(9)}).Validate(), "quarantined_gpus"},
		{(&Node{ID: "n1", GPUs: 8, Health: "sad"}).Validate(), "health"},
		{(&Node{ID: "n1", GPUs: 2, Links: &LinkMatrix{Links: [][]int{{0, 1}, {2, 0}}}}).Validate(), "symmetric"},
		{(&Shape{GPUs: 0, Topology: TopologyNode}).Validate("job."), "job.gpus"},
		{(&Shape{GPUs: 8, Topology: "rack"}).Validate("job."), "topology"},
		{(&Shape{GPUs: 8, Topology: TopologyNode, CPUMilli: -1}).Validate(""), "cpu_milli"},
		{(&Shape{GPUs: 8, Topology: TopologyNode, Models: []string{""}}).Validate(""), "models[0]"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("error %v does not name %q", tt.err, tt.want)
		}
	}
	if err := (&Node{ID: "n1", GPUs: 8, Health: HealthHealthy}).Validate(); err != nil {
		t.Fatalf("valid node: %v", err)
	}
}

func TestDeploymentTarget(t *testing.T) {
	d := Deployment{MinReplicas: 2, MaxReplicas: 5}
	for desired, want := range map[int]int{0: 2, 3: 3, 9: 5} {
		d.Desired = desired
		if got := d.Target(); got != want {
			t.Errorf("desired %d: target %d, want %d", desired, got, want)
		}
	}
}
