package model

import "time"

// Sample is the fleet at one instant, as the dashboard plots it over the
// last hours: kept in the table (store kind history) by the leader every
// Config.HistoryEvery, so a leader change loses none of it.
type Sample struct {
	At time.Time `json:"at"`
	// Largest is largest_placeable for node, pod and any, as a new
	// training job sees it (the number GET /v1/cluster/topology gives).
	LargestNode int `json:"largest_node"`
	LargestPod  int `json:"largest_pod"`
	LargestAny  int `json:"largest_any"`
	// AllocatedGPUs of TotalGPUs (schedulable, quarantined GPUs out).
	AllocatedGPUs int `json:"allocated_gpus"`
	TotalGPUs     int `json:"total_gpus"`
	// Queued counts pending training jobs by size class: <8, 8-63,
	// 64-255, ≥256 GPUs.
	Queued [4]int `json:"queued"`
	// Preemptions in the hour before At, and their GPUs.
	Preemptions     int `json:"preemptions"`
	PreemptedGPUs   int `json:"preempted_gpus"`
	InferenceShort  int `json:"inference_short,omitempty"` // replicas below target
	RunningTraining int `json:"running_training"`
}

// SizeClass is a job's class for Sample.Queued.
func SizeClass(gpus int) int {
	switch {
	case gpus < 8:
		return 0
	case gpus < 64:
		return 1
	case gpus < 256:
		return 2
	}
	return 3
}
