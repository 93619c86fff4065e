package model

// FaultClass is how berth reacts to a GPU fault (NVIDIA's XID catalogue).
type FaultClass string

const (
	// FaultNode: the node is quarantined and its work moved (XID 79, the
	// GPU fell off the bus; NVML itself failing).
	FaultNode FaultClass = "node"
	// FaultGPU: that GPU is quarantined and its work moved.
	FaultGPU FaultClass = "gpu"
	// FaultApp: the application's own error; the job is told, nothing is
	// quarantined.
	FaultApp FaultClass = "application"
	// FaultUnknown XIDs are recorded and otherwise ignored.
	FaultUnknown FaultClass = "unknown"
)

// ClassifyFault maps a fault to its class.
func ClassifyFault(f GPUFault) FaultClass {
	switch f.Kind {
	case "nvml":
		return FaultNode
	case "ecc", "lost":
		return FaultGPU
	}
	switch f.XID {
	case 79:
		return FaultNode
	case 46, 48, 62, 64, 95, 119, 120:
		return FaultGPU
	case 13, 31, 43, 45, 94:
		return FaultApp
	}
	return FaultUnknown
}
