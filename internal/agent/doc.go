// Package agent is berth's node agent: it runs on every GPU node, says
// what the node has and what actually runs there in each heartbeat, and
// converges the node to the desired state the control plane answers with.
//
// Identity is (node id, boot epoch) (R5): the epoch is a counter kept in
// the state directory and incremented at every start, so a restarted
// agent is a new incarnation whose old allocations the control plane
// invalidates. Whatever an earlier incarnation left running is stopped
// before the first heartbeat, so the GPUs are free when the control plane
// hears of the new epoch.
//
// The agent is level-triggered: each answer is the whole desired state,
// and the agent starts what should run, stops what should not, and keeps
// reporting exits until the control plane has released them. A lost
// message costs one interval. When the control plane cannot be reached
// the agent keeps everything running (§8: the scheduler binds, it does not
// supervise) and retries with backoff. Orders that are malformed, for
// another node or epoch, or carry a fence lower than one already seen are
// ignored whole, so a stale leader or a broken proxy cannot stop work.
//
// The exec driver runs each allocation's command as its own process group
// with the allocation's GPUs visible, per-allocation capped logs and,
// where the host delegates cgroup v2, cpu and memory limits. Stopping is
// SIGTERM, then SIGKILL at the deadline and never before; an allocation
// is reported exited only once no process of its group is left. The
// container driver (container.go) runs a workload that names an image
// with podman, a real OCI runtime on the node: the same shim, logs and
// stop sequence, plus a named, labelled container that is removed before
// its allocation is reported exited. Podman is called as a command, not
// through its Go bindings: those pull in podman's whole tree and need a
// socket service running, where the CLI is what every node already has
// and what an operator debugs with.
package agent
