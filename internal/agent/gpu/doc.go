// Package gpu discovers a node's GPUs and watches them for faults.
//
// Two backends share one interface. NVML (NVIDIA's management library,
// through github.com/NVIDIA/go-nvml) is the real one: GPU count, UUIDs,
// model, memory, the NVLink matrix, ECC counters and XID events. The fake
// backend stands in on machines without GPUs (laptops, CI, `berth dev`)
// and takes injected faults from a file, so every fault path the control
// plane handles can be driven by a test or a demo.
//
// The package reports faults; it does not judge them. Which XID fences a
// GPU and which only tells the job is the control plane's table
// (model.ClassifyFault), so one place holds §8's catalogue.
package gpu
