package sched

import "github.com/berthsched/berth/internal/model"

// PoolSizes says how many nodes each pool should hold.
type PoolSizes struct {
	// InferenceGPUs is R1's sizing: Σ max_replicas × replica GPUs over the
	// deployments whose replicas route to the inference pool.
	InferenceGPUs  int `json:"inference_gpus"`
	InferenceNodes int `json:"inference_nodes"`
	SmallNodes     int `json:"small_nodes"`
	// SwapNodes is R4's swap pool: max(1, ceil(1% of nodes)).
	SwapNodes     int `json:"swap_nodes"`
	TrainingNodes int `json:"training_nodes"`
}

// SizePools assigns every node a pool: the inference pool sized from the
// deployments, smallNodes nodes for sub-node work, the swap pool when one is
// named, and the rest training. Pools take whole pods' worth of nodes from
// the end of the (pod, id) order so that training keeps whole pods together.
// Nodes keep no previous label: the result is a full proposal.
func SizePools(nodes []model.Node, deps []model.Deployment, p Pools, smallNodes int) (map[string]string, PoolSizes) {
	sorted := byPodThenID(nodes)
	var sz PoolSizes
	for i := range deps {
		req := model.Request{Shape: deps[i].ReplicaShape, Kind: model.OwnerInference}
		if r := p.routes(&req); len(r) > 0 && r[0].pool == p.Inference && p.Inference != "" {
			sz.InferenceGPUs += deps[i].MaxReplicas * deps[i].ReplicaShape.GPUs
		}
	}
	out := make(map[string]string, len(nodes))
	end := len(sorted)
	take := func(pool string, gpus, count int) int {
		n := 0
		for end > 0 && pool != "" && (gpus > 0 || n < count) {
			end--
			out[sorted[end].ID] = pool
			gpus -= sorted[end].GPUs
			n++
		}
		return n
	}
	sz.InferenceNodes = take(p.Inference, sz.InferenceGPUs, 0)
	sz.SmallNodes = take(p.Small, 0, smallNodes)
	if p.Swap != "" {
		sz.SwapNodes = take(p.Swap, 0, max(1, (len(nodes)+99)/100))
	}
	for _, n := range sorted[:end] {
		out[n.ID] = p.Training
	}
	sz.TrainingNodes = end
	return out, sz
}
