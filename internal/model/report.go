package model

import "time"

// NodeReport is what a node agent says in each heartbeat: who it is
// (node id and boot epoch, R5), what it has, how healthy it is, and what
// actually runs there. The control plane answers with NodeOrders.
type NodeReport struct {
	NodeID    string `json:"node_id"`
	BootEpoch uint64 `json:"boot_epoch"`
	BootID    string `json:"boot_id,omitempty"`
	// NodeUUID is created once in the agent's state directory: a node
	// whose state was wiped, or a new machine under an old name, reports
	// a new one (R5, with BootID and BootEpoch).
	NodeUUID  string `json:"node_uuid,omitempty"`
	Pod       string `json:"pod"`
	Pool      string `json:"pool,omitempty"`
	Model     string `json:"model"`
	GPUs      int    `json:"gpus"`
	CPUMilli  int64  `json:"cpu_milli"`
	MemoryMiB int64  `json:"memory_mib"`
	// GPUUUIDs lists the GPUs by index, when the backend knows them.
	GPUUUIDs []string    `json:"gpu_uuids,omitempty"`
	Links    *LinkMatrix `json:"links,omitempty"`
	// MIG is the MIG layout per GPU, as Node.MIG has it.
	MIG [][]int `json:"mig,omitempty"`
	// MIGProfiles names MIG's instances, as Node.MIGProfiles has it.
	MIGProfiles [][]string `json:"mig_profiles,omitempty"`
	// Faults are GPU faults seen since the last accepted report.
	Faults      []GPUFault    `json:"faults,omitempty"`
	Allocations []ActualAlloc `json:"allocations,omitempty"`
	// Previous are the allocations of this node's earlier boot epoch as
	// the agent found them in its state directory (their last checkpoint),
	// sent until a report is accepted: the requeue starts from there.
	Previous []ActualAlloc `json:"previous,omitempty"`
	// Fence is the highest fence the agent has seen.
	Fence int64 `json:"fence,omitempty"`
}

// GPUFault is one hardware fault. XID follows NVIDIA's catalogue; GPU is
// the index, or -1 for the whole node (NVML itself failing).
type GPUFault struct {
	GPU     int    `json:"gpu"`
	XID     int    `json:"xid,omitempty"`
	Kind    string `json:"kind"` // xid, ecc, lost, nvml
	Message string `json:"message,omitempty"`
}

// ActualState is what an agent sees of an allocation's process.
type ActualState string

const (
	ActualStarting ActualState = "starting"
	ActualRunning  ActualState = "running"
	ActualStopping ActualState = "stopping"
	ActualExited   ActualState = "exited"
)

// ActualAlloc is one allocation as the agent sees it.
type ActualAlloc struct {
	ID       string      `json:"id"`
	State    ActualState `json:"state"`
	ExitCode int         `json:"exit_code,omitempty"`
	// Killed says the process was SIGKILLed at its deadline rather than
	// exiting on its own after SIGTERM.
	Killed bool `json:"killed,omitempty"`
	// Checkpoint is the last checkpoint the process recorded (in
	// $BERTH_ALLOC_DIR/checkpoint), periodic or before exiting: reported
	// while it runs, so every requeue path starts from it.
	Checkpoint string `json:"checkpoint,omitempty"`
	// OOMKilled: the kernel killed the workload (a container) for using
	// more memory than its limit.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// StartError says why the workload never ran: its command not found,
	// its image not pulled (exit 127 or 125).
	StartError string `json:"start_error,omitempty"`
	// AgentStop says the agent itself stopped the process because the
	// agent was shutting down all work (berth dev stopping): the exit is
	// not the workload's own, nor a preemption.
	AgentStop bool `json:"agent_stop,omitempty"`
	// CheckpointStats is the workload's report of the last checkpoint it
	// wrote, periodic or on SIGTERM (R3).
	CheckpointStats *CheckpointStats `json:"checkpoint_stats,omitempty"`
	// Ready says an inference replica's readiness check passes (R4); for
	// work without a check, that its process runs.
	Ready bool `json:"ready,omitempty"`
	// Error says why the agent refused the allocation rather than run it
	// (an order it could not act on); the allocation is then exited with
	// code 126, and the rest of the node's orders are carried out.
	Error string `json:"error,omitempty"`
}

// CheckpointStats is what a workload reports of one checkpoint it wrote:
// its size, how long the write took, and when it finished. The control
// plane measures the checkpoint storage's bandwidth from them.
type CheckpointStats struct {
	Bytes   int64     `json:"bytes"`
	Seconds float64   `json:"seconds"`
	At      time.Time `json:"at"`
}

// NodeOrders is the desired state for one node: what should run there,
// what must stop and by when, under the writer's fence.
type NodeOrders struct {
	NodeID      string         `json:"node_id"`
	BootEpoch   uint64         `json:"boot_epoch"`
	Fence       int64          `json:"fence"`
	Allocations []DesiredAlloc `json:"allocations"`
	// HeartbeatInterval is how often the server wants to hear from it.
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	// Servers are the servers of this control plane (advertised URLs),
	// so an agent started with one address knows every one to try when
	// that one fails.
	Servers []string `json:"servers,omitempty"`
}

// DesiredAlloc is one allocation the node should run, or stop.
type DesiredAlloc struct {
	ID        string    `json:"id"`
	OwnerKind OwnerKind `json:"owner_kind"`
	OwnerID   string    `json:"owner_id"`
	Replica   int       `json:"replica,omitempty"`
	GPUs      GPUMask   `json:"gpu_mask"`
	// GPUMilli is the share of the one GPU (MPS), 0 for whole GPUs.
	GPUMilli int `json:"gpu_milli,omitempty"`
	// MIGInstance is the MIG instance the share runs on (Allocation's).
	MIGInstance int       `json:"mig_instance,omitempty"`
	CPUMilli    int64     `json:"cpu_milli,omitempty"`
	MemoryMiB   int64     `json:"memory_mib,omitempty"`
	Workload    *Workload `json:"workload,omitempty"`
	// CheckpointDir and Restore come from the job's checkpoint spec.
	CheckpointDir string `json:"checkpoint_dir,omitempty"`
	Restore       string `json:"restore,omitempty"`
	// JobGPUs is, for an elastic job, the size the whole job runs at now:
	// the agent tells the workload when it changes (§9.4).
	JobGPUs int `json:"job_gpus,omitempty"`
	// Stop asks for SIGTERM now; Kill for SIGKILL (the deadline passed).
	Stop         bool      `json:"stop,omitempty"`
	StopDeadline time.Time `json:"stop_deadline,omitzero"`
	Kill         bool      `json:"kill,omitempty"`
}
