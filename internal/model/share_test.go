package model

import (
	"strings"
	"testing"
)

// TestShapeGPUMilli checks the validation of a share of one GPU: 1-999
// milli, of exactly one GPU, on one node.
func TestShapeGPUMilli(t *testing.T) {
	tests := []struct {
		name  string
		shape Shape
		want  string // field the error names; "" for valid
	}{
		{"a share of one GPU on a node", Shape{GPUs: 1, GPUMilli: 300, Topology: TopologyNode}, ""},
		{"smallest share", Shape{GPUs: 1, GPUMilli: 1, Topology: TopologyNode}, ""},
		{"largest share", Shape{GPUs: 1, GPUMilli: 999, Topology: TopologyNode}, ""},
		{"whole GPUs", Shape{GPUs: 8, GPUMilli: 0, Topology: TopologyPod}, ""},
		{"1000 is a whole GPU, not a share", Shape{GPUs: 1, GPUMilli: 1000, Topology: TopologyNode}, "gpu_milli"},
		{"negative", Shape{GPUs: 1, GPUMilli: -1, Topology: TopologyNode}, "gpu_milli"},
		{"more than a GPU", Shape{GPUs: 1, GPUMilli: 1200, Topology: TopologyNode}, "gpu_milli"},
		{"a share of two GPUs", Shape{GPUs: 2, GPUMilli: 300, Topology: TopologyNode}, "gpu_milli"},
		{"a share across a pod", Shape{GPUs: 1, GPUMilli: 300, Topology: TopologyPod}, "topology"},
		{"a share anywhere", Shape{GPUs: 1, GPUMilli: 300, Topology: TopologyAny}, "topology"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.shape.Validate("shape.")
			if tt.want == "" {
				if err != nil {
					t.Fatalf("%+v: %v, want valid", tt.shape, err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "shape."+tt.want+":") {
				t.Fatalf("%+v: error %v, want one naming shape.%s", tt.shape, err, tt.want)
			}
		})
	}
}

func TestShapeFraction(t *testing.T) {
	for milli, want := range map[int]bool{0: false, 1: true, 500: true, 999: true} {
		s := Shape{GPUs: 1, GPUMilli: milli, Topology: TopologyNode}
		if got := s.Fraction(); got != want {
			t.Errorf("Shape{GPUMilli: %d}.Fraction() = %v, want %v", milli, got, want)
		}
	}
}

// A job and a deployment carry the shape's error under their own prefix.
func TestShareValidationPrefixes(t *testing.T) {
	j := Job{ID: "j", Shape: Shape{GPUs: 1, GPUMilli: 1500, Topology: TopologyNode}}
	if err := j.Validate(); err == nil || !strings.HasPrefix(err.Error(), "shape.gpu_milli:") {
		t.Errorf("job: %v, want an error naming shape.gpu_milli", err)
	}
	d := Deployment{ID: "d", MaxReplicas: 1, ReplicaShape: Shape{GPUs: 1, GPUMilli: 1500, Topology: TopologyNode}}
	if err := d.Validate(); err == nil || !strings.HasPrefix(err.Error(), "replica_shape.gpu_milli:") {
		t.Errorf("deployment: %v, want an error naming replica_shape.gpu_milli", err)
	}
}
