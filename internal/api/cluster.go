package api

import (
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Largest is largest_placeable per topology: the biggest request of each
// kind that fits now.
type Largest struct {
	Node int `json:"node"`
	Pod  int `json:"pod"`
	Any  int `json:"any"`
}

// PodFree is one pod's free map.
type PodFree struct {
	Pod           string `json:"pod"`
	FreeGPUs      int    `json:"free_gpus"`
	FreeNodesFull int    `json:"free_nodes_full"`
	Largest       int    `json:"largest_placeable"`
}

// Topology is GET /v1/cluster/topology: free sets, not counts (§3).
type Topology struct {
	LargestPlaceable Largest        `json:"largest_placeable"`
	FreeNodesFull    int            `json:"free_nodes_full"`
	FreeByNode       map[string]int `json:"free_by_node"`
	FreeGPUs         int            `json:"free_gpus"`
	AllocatedGPUs    int            `json:"allocated_gpus"`
	TotalGPUs        int            `json:"total_gpus"`
	// Fragmentation is the share of free capacity no whole-node request of
	// FragTarget GPUs can use; milli left on shared GPUs counts as free
	// and as fragmented.
	Fragmentation  float64   `json:"fragmentation"`
	FragmentedGPUs int       `json:"fragmented_gpus"`
	FragTarget     int       `json:"frag_target"`
	Pods           []PodFree `json:"pods"`
	// Shares (gpu_milli): GPUs holding them, their milli left, and the
	// largest share the sharing pool can place now.
	SharedGPUs      int `json:"shared_gpus"`
	SharedFreeMilli int `json:"shared_free_milli"`
	LargestShare    int `json:"largest_placeable_milli"`
	// CheckpointBandwidth is the checkpoint storage bandwidth preemption
	// deadlines are set from, in bytes/s (R3): measured from the
	// checkpoints workloads report when Measured, else the configured one.
	CheckpointBandwidth float64 `json:"checkpoint_bandwidth"`
	Measured            bool    `json:"checkpoint_bandwidth_measured"`
	// CheckpointFloor is the bandwidth below which preemption stops.
	CheckpointFloor float64 `json:"checkpoint_bandwidth_floor"`
}

// Node is GET /v1/nodes entries.
type Node struct {
	model.Node
	FreeGPUs      int       `json:"free_gpus"`
	AllocatedMask string    `json:"allocated_mask"`
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
}

// NodeList is GET /v1/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// QuotaRequest is PUT /v1/quotas/{scope}.
type QuotaRequest struct {
	GuaranteedGPUs int `json:"guaranteed_gpus"`
	MaxGPUs        int `json:"max_gpus,omitempty"`
}

// Quota is one scope's quota with its use.
type Quota struct {
	model.Quota
	UsedGPUs     int `json:"used_gpus"`
	BorrowedGPUs int `json:"borrowed_gpus"`
}

// QuotaList is GET /v1/quotas.
type QuotaList struct {
	Quotas []Quota `json:"quotas"`
}

// Heartbeat is POST /v1/agent/heartbeat; the answer is Orders.
type Heartbeat = model.NodeReport

// Orders is the desired state an agent converges to.
type Orders = model.NodeOrders

// TokenRequest is POST /v1/tokens (admin).
type TokenRequest struct {
	// Role is admin, team:<name>, autoscaler:<deployment> or agent:<node>.
	Role string `json:"role"`
	Name string `json:"name,omitempty"`
}

// Token is the answer: the secret is shown once and stored only hashed.
type Token struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Name      string    `json:"name,omitempty"`
	Secret    string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Leader is GET /v1/leader.
type Leader struct {
	Leader string `json:"leader"`
	Fence  int64  `json:"fence"`
	Self   string `json:"self"`
	IsSelf bool   `json:"is_self"`
}
