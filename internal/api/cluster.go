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
	// TTL is how long the token is valid (a duration such as 24h); empty
	// for no expiry.
	TTL string `json:"ttl,omitempty"`
}

// Token is the answer: the secret is shown once and stored only hashed.
// ID is the token's immutable id, which revocation names.
type Token struct {
	ID        string     `json:"id"`
	Role      string     `json:"role"`
	Name      string     `json:"name,omitempty"`
	Secret    string     `json:"token,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Expired is set in GET /v1/tokens for a token past its expiry.
	Expired bool `json:"expired,omitempty"`
	// DeploymentUID is what an autoscaler token is bound to: the
	// deployment's immutable uid, not its reusable name.
	DeploymentUID string `json:"deployment_uid,omitempty"`
}

// TokenList is GET /v1/tokens (admin): every token, never a secret.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// MaxTokenTTL bounds a token's lifetime (ten years).
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// Validate checks the request.
func (r *TokenRequest) Validate() (time.Duration, error) {
	if err := CheckText("name", r.Name, 253); err != nil {
		return 0, err
	}
	ttl, err := duration("ttl", r.TTL)
	if err != nil {
		return 0, err
	}
	if r.TTL != "" && (ttl < time.Second || ttl > MaxTokenTTL) {
		return 0, Invalid("ttl", "%q: expected 1s to %s, or leave it out for no expiry", r.TTL, MaxTokenTTL)
	}
	return ttl, nil
}

// Leader is GET /v1/leader.
type Leader struct {
	Leader string `json:"leader"`
	Fence  int64  `json:"fence"`
	Self   string `json:"self"`
	IsSelf bool   `json:"is_self"`
}
