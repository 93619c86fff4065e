package schedtest

import (
	"fmt"

	"github.com/berthsched/berth/internal/model"
)

// PodName names pod p the way the design's examples do: pod-a, pod-b, ...
func PodName(p int) string {
	if p < 26 {
		return "pod-" + string(rune('a'+p))
	}
	return fmt.Sprintf("pod-%03d", p)
}

// NodeName names the i-th node of a fleet: n000, n001, ...
func NodeName(i int) string { return fmt.Sprintf("n%03d", i) }

// Spec describes a homogeneous slice of a fleet.
type Spec struct {
	Pods, NodesPerPod, GPUs int
	Model                   string // default H100
	Pool                    string
	CPUMilli, MemoryMiB     int64 // per node; default 16 cores and 256 GiB per 8 GPUs
	// FirstPod and FirstNode offset names when a fleet is built in slices.
	FirstPod, FirstNode int
}

// Fleet builds the nodes of a spec, healthy and empty.
func Fleet(s Spec) []model.Node {
	if s.Model == "" {
		s.Model = "H100"
	}
	if s.CPUMilli == 0 {
		s.CPUMilli = int64(s.GPUs) * 16000
	}
	if s.MemoryMiB == 0 {
		s.MemoryMiB = int64(s.GPUs) * 256 * 1024
	}
	out := make([]model.Node, 0, s.Pods*s.NodesPerPod)
	for p := 0; p < s.Pods; p++ {
		for n := 0; n < s.NodesPerPod; n++ {
			out = append(out, model.Node{
				ID: NodeName(s.FirstNode + p*s.NodesPerPod + n), Pod: PodName(s.FirstPod + p), Pool: s.Pool,
				Model: s.Model, GPUs: s.GPUs, CPUMilli: s.CPUMilli, MemoryMiB: s.MemoryMiB,
				Health: model.HealthHealthy, BootEpoch: 1,
			})
		}
	}
	return out
}
