package model

// AllocGPUs is what an allocation holds in GPUs: a share counts its part.
func AllocGPUs(a *Allocation) float64 {
	if a.GPUMilli > 0 {
		return float64(a.GPUMilli) / 1000
	}
	return float64(a.GPUs.Count())
}

// SchedulableGPUs is the GPUs work may be placed on: schedulable nodes,
// quarantined GPUs out.
func SchedulableGPUs(nodes []Node) int {
	n := 0
	for i := range nodes {
		if nodes[i].Schedulable() {
			n += nodes[i].GPUs - nodes[i].QuarantinedGPUs.Count()
		}
	}
	return n
}

// AllocatedGPUs is the GPUs allocations hold; a shared GPU counts once,
// however many shares it holds.
func AllocatedGPUs(allocs []Allocation) int {
	n := 0
	shared := map[string]bool{}
	for i := range allocs {
		a := &allocs[i]
		if a.GPUMilli > 0 {
			k := a.NodeID + "/" + a.GPUs.String()
			if !shared[k] {
				shared[k] = true
				n++
			}
			continue
		}
		n += a.GPUs.Count()
	}
	return n
}
