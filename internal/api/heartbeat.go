package api

import "github.com/berthsched/berth/internal/model"

// ValidateHeartbeat checks a node report before it touches the table.
func ValidateHeartbeat(h *Heartbeat) error {
	switch {
	case CheckName("node_id", h.NodeID, false) != nil:
		return CheckName("node_id", h.NodeID, false)
	case h.Pod != "" && CheckName("pod", h.Pod, false) != nil:
		return CheckName("pod", h.Pod, false)
	case h.Pool != "" && CheckName("pool", h.Pool, false) != nil:
		return CheckName("pool", h.Pool, false)
	case CheckText("model", h.Model, MaxNameLen) != nil:
		return CheckText("model", h.Model, MaxNameLen)
	case h.BootEpoch == 0:
		return Invalid("boot_epoch", "required: a counter the agent persists and increments at every boot")
	case len(h.BootID) > 64:
		return Invalid("boot_id", "at most 64 characters")
	case len(h.NodeUUID) > 64:
		return Invalid("node_uuid", "at most 64 characters")
	case len(h.Previous) > 4096:
		return Invalid("previous", "%d allocations: at most 4096", len(h.Previous))
	case h.GPUs < 1 || h.GPUs > model.MaxGPUsPerNode:
		return Invalid("gpus", "%d: expected 1 to %d", h.GPUs, model.MaxGPUsPerNode)
	case h.Model == "":
		return Invalid("model", "required: the GPU model, e.g. H100")
	case h.CPUMilli < 0 || h.CPUMilli > model.MaxCPUMilli:
		return Invalid("cpu_milli", "%d: expected 0 to %d", h.CPUMilli, int64(model.MaxCPUMilli))
	case h.MemoryMiB < 0 || h.MemoryMiB > model.MaxMemoryMiB:
		return Invalid("memory_mib", "%d: expected 0 to %d", h.MemoryMiB, int64(model.MaxMemoryMiB))
	case len(h.Allocations) > 4096:
		return Invalid("allocations", "%d allocations: at most 4096", len(h.Allocations))
	case len(h.Faults) > 4096:
		return Invalid("faults", "%d faults: at most 4096", len(h.Faults))
	case len(h.GPUUUIDs) > 0 && len(h.GPUUUIDs) != h.GPUs:
		return Invalid("gpu_uuids", "%d UUIDs for %d GPUs", len(h.GPUUUIDs), h.GPUs)
	}
	n := model.Node{ID: h.NodeID, GPUs: h.GPUs, Links: h.Links}
	if err := n.Validate(); err != nil {
		return Invalid("links", "%s", err.Error())
	}
	n.Links, n.MIG = nil, h.MIG
	if err := n.Validate(); err != nil {
		return Invalid("mig", "%s", err.Error())
	}
	n.MIGProfiles = h.MIGProfiles
	if err := n.Validate(); err != nil {
		return Invalid("mig_profiles", "%s", err.Error())
	}
	for i, f := range h.Faults {
		if f.GPU < -1 || f.GPU >= h.GPUs {
			return Invalid("faults", "[%d].gpu: %d is not a GPU of this node (0-%d, or -1 for the node)", i, f.GPU, h.GPUs-1)
		}
		switch f.Kind {
		case "xid", "ecc", "lost", "nvml":
		default:
			return Invalid("faults", "[%d].kind: %q: expected xid, ecc, lost or nvml", i, f.Kind)
		}
	}
	for i, a := range h.Previous {
		if a.ID == "" || len(a.Checkpoint) > 4096 {
			return Invalid("previous", "[%d]: an id and a checkpoint of at most 4096 bytes expected", i)
		}
	}
	for i, a := range h.Allocations {
		if len(a.Checkpoint) > 4096 {
			return Invalid("allocations", "[%d].checkpoint: %d bytes: at most 4096", i, len(a.Checkpoint))
		}
		if a.ID == "" {
			return Invalid("allocations", "[%d].id: required", i)
		}
		if len(a.Error) > 4096 {
			return Invalid("allocations", "[%d].error: %d bytes: at most 4096", i, len(a.Error))
		}
		switch a.State {
		case model.ActualStarting, model.ActualRunning, model.ActualStopping, model.ActualExited:
		default:
			return Invalid("allocations", "[%d].state: %q: expected starting, running, stopping or exited", i, a.State)
		}
		if st := a.CheckpointStats; st != nil && (st.Bytes <= 0 || !(st.Seconds > 0 && st.Seconds < 1e7) || st.At.IsZero()) {
			return Invalid("allocations", "[%d].checkpoint_stats: bytes %d, seconds %g: expected positive bytes, seconds between 0 and 1e7, and at", i, st.Bytes, st.Seconds)
		}
	}
	return nil
}
