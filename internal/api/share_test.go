package api_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/api"
)

func TestJobRequestGPUMilli(t *testing.T) {
	tests := []struct {
		name     string
		gpus     int
		milli    int
		topology string
		field    string // "" when valid
	}{
		{"a share", 1, 300, "node", ""},
		{"whole GPUs", 4, 0, "node", ""},
		{"more than one GPU", 1, 1500, "node", "gpu_milli"},
		{"a whole GPU as milli", 1, 1000, "node", "gpu_milli"},
		{"negative", 1, -1, "node", "gpu_milli"},
		{"a share of two GPUs", 2, 300, "node", "gpu_milli"},
		{"a share in a pod", 1, 300, "pod", "topology"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := api.JobRequest{Name: "nb", GPUs: tt.gpus, GPUMilli: tt.milli, Topology: tt.topology, Image: "x"}
			j, err := r.Job("j1")
			if tt.field == "" {
				if err != nil {
					t.Fatalf("valid request refused: %v", err)
				}
				if j.Shape.GPUMilli != tt.milli || j.Shape.GPUs != tt.gpus {
					t.Fatalf("shape %+v, want gpus %d gpu_milli %d", j.Shape, tt.gpus, tt.milli)
				}
				return
			}
			var e *api.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *api.Error", err, err)
			}
			if e.Code != "invalid" || e.Field != tt.field {
				t.Fatalf("error %+v, want code invalid on field %q", e, tt.field)
			}
		})
	}
}

func TestDeploymentRequestGPUMilli(t *testing.T) {
	for _, milli := range []int{1, 250, 999} {
		t.Run(fmt.Sprint(milli), func(t *testing.T) {
			body := fmt.Sprintf(`{"name":"nb","model":"m","min_replicas":1,"max_replicas":3,
				"replica_shape":{"gpus":1,"gpu_milli":%d,"topology":"node"}}`, milli)
			var r api.DeploymentRequest
			if err := api.Decode(strings.NewReader(body), &r); err != nil {
				t.Fatalf("decode: %v", err)
			}
			d, err := r.Deployment()
			if err != nil {
				t.Fatalf("deployment: %v", err)
			}
			if d.ReplicaShape.GPUMilli != milli || d.ReplicaShape.GPUs != 1 || !d.ReplicaShape.Fraction() {
				t.Fatalf("replica shape %+v, want one GPU at %d milli", d.ReplicaShape, milli)
			}
		})
	}
	for _, milli := range []int{1000, 1500, -5} {
		r := api.DeploymentRequest{Name: "nb", MinReplicas: 1, MaxReplicas: 1,
			ReplicaShape: api.ReplicaShape{GPUs: 1, GPUMilli: milli, Topology: "node"}}
		_, err := r.Deployment()
		var e *api.Error
		if !errors.As(err, &e) || e.Field != "replica_shape.gpu_milli" {
			t.Errorf("gpu_milli %d: error %v, want one on replica_shape.gpu_milli", milli, err)
		}
	}
}
