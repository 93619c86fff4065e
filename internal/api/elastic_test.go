package api_test

import (
	"errors"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

func TestJobRequestElastic(t *testing.T) {
	ck := &api.CheckpointRequest{Path: "/ckpt/x"}
	tests := []struct {
		name     string
		gpus     int
		topology string
		e        model.Elastic
		ck       *api.CheckpointRequest
		field    string // "" when valid
	}{
		{"gpus left out: the maximum", 0, "pod", model.Elastic{MinGPUs: 64, MaxGPUs: 128}, ck, ""},
		{"gpus at the maximum", 128, "any", model.Elastic{MinGPUs: 64, MaxGPUs: 128, Sizes: []int{64, 128}}, ck, ""},
		{"gpus not the maximum", 96, "pod", model.Elastic{MinGPUs: 64, MaxGPUs: 128}, ck, "gpus"},
		{"node topology, single GPUs of one node", 0, "node", model.Elastic{MinGPUs: 2, MaxGPUs: 8}, ck, ""},
		{"node topology, no GPUs", 0, "node", model.Elastic{MinGPUs: 0, MaxGPUs: 8}, ck, "elastic.min_gpus"},
		{"part of a node", 0, "pod", model.Elastic{MinGPUs: 4, MaxGPUs: 16}, ck, "elastic.min_gpus"},
		{"min at max", 0, "pod", model.Elastic{MinGPUs: 16, MaxGPUs: 16}, ck, "elastic.max_gpus"},
		{"sizes out of range", 0, "pod", model.Elastic{MinGPUs: 16, MaxGPUs: 32, Sizes: []int{16, 48}}, ck, "elastic.sizes[1]"},
		{"too many sizes", 0, "pod", model.Elastic{MinGPUs: 8, MaxGPUs: 8 * 100, Sizes: make([]int, 65)}, ck, "elastic.sizes"},
		{"no checkpoint", 0, "pod", model.Elastic{MinGPUs: 16, MaxGPUs: 32}, nil, "checkpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.e
			r := api.JobRequest{Name: "el", GPUs: tt.gpus, Topology: tt.topology, Image: "x", Elastic: &e, Checkpoint: tt.ck}
			j, err := r.Job("j1")
			if tt.field == "" {
				if err != nil {
					t.Fatalf("valid request refused: %v", err)
				}
				if j.Elastic == nil || j.Shape.GPUs != tt.e.MaxGPUs {
					t.Fatalf("job %+v elastic %+v, want gpus %d", j.Shape, j.Elastic, tt.e.MaxGPUs)
				}
				return
			}
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Field != tt.field {
				t.Fatalf("error %v (%+v), want one on field %q", err, ae, tt.field)
			}
		})
	}
}
