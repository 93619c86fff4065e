package api

import "time"

// Usage is GET /v1/usage: GPU-hours, preemptions and queue time per
// group over a window, from finished work's records and what runs now.
type Usage struct {
	Since time.Time  `json:"since"`
	Until time.Time  `json:"until"`
	By    string     `json:"by"`
	Rows  []UsageRow `json:"rows"`
}

// UsageRow is one group's figures. GPUHours counts finished jobs that
// ended in the window whole, replicas for the part of their life inside
// it, and RunningGPUHours what runs now, from its start or the window's.
type UsageRow struct {
	Key             string  `json:"key"`
	Jobs            int     `json:"jobs"`
	Replicas        int     `json:"replicas"`
	GPUHours        float64 `json:"gpu_hours"`
	RunningGPUHours float64 `json:"running_gpu_hours"`
	// Preemptions suffered by the jobs that finished in the window.
	Preemptions int `json:"preemptions"`
	// Queue time of the jobs that finished in the window: all their time
	// pending, every wait counted.
	QueueP50Hours float64 `json:"queue_p50_hours"`
	QueueP90Hours float64 `json:"queue_p90_hours"`
}

// UsageGroups are the by= groupings.
var UsageGroups = []string{"team", "org", "user", "kind"}
