package control

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// Heartbeat takes one node report and returns the node's desired state.
// It writes only when the report changes the table: first contact, a new
// boot epoch (R5), changed resources, health, faults, or exits.
func (c *Controller) Heartbeat(ctx context.Context, rep model.NodeReport) (model.NodeOrders, error) {
	w, err := c.Writer()
	if err != nil {
		return model.NodeOrders{}, err
	}
	if rep.Fence > w.Fence() {
		// The agent has heard from a newer leader: this one is stale.
		return model.NodeOrders{}, store.ErrFenced
	}
	t0 := time.Now()
	now := c.cfg.Clock()
	// The report proves the node alive whether or not its write lands,
	// and the pass its write triggers must not judge it by the silence
	// it just ended.
	c.live.heard(&rep, now)
	for attempt := 0; ; attempt++ {
		ch := c.newChange(w, now)
		c.report(ch, &rep)
		if ch.empty() {
			break
		}
		_, err := w.Commit(ctx, ch.txn)
		if err == nil {
			if ch.freed {
				c.urge()
			} else if ch.grew {
				c.wake()
			}
			break
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 8 {
			return model.NodeOrders{}, err
		}
		// Out of step with whatever keeps writing the same objects (a
		// pass binding onto this node): a short, growing, jittered wait.
		time.Sleep(time.Duration(attempt+1) * time.Duration(1+rand.IntN(4)) * time.Millisecond)
	}
	if m := c.cfg.Metrics; m != nil {
		m.HeartbeatLag(time.Since(t0))
	}
	return c.orders(rep.NodeID, w.Fence()), nil
}

// report applies one node report to a change.
func (c *Controller) report(ch *change, rep *model.NodeReport) {
	n := ch.node(rep.NodeID)
	why := ""
	if n != nil {
		why = identityChange(n, rep)
	}
	switch {
	case n == nil:
		// First contact: assume nothing runs there (R5, the safe
		// direction); whatever the agent runs is not in its orders and
		// stops.
		n = ch.newNode(model.Node{ID: rep.NodeID, Health: model.HealthHealthy, BootEpoch: rep.BootEpoch,
			BootID: rep.BootID, NodeUUID: rep.NodeUUID})
		ch.grew = true
		c.log.Info("node joined", "node", rep.NodeID, "epoch", rep.BootEpoch)
	case why != "":
		// Not the machine, or not the boot, the allocations were made
		// on: everything on it is gone, whatever the agent believes. The
		// jobs go back from the last checkpoint they recorded, or the one
		// the agent found left in its state directory.
		last := map[string]string{}
		for _, p := range rep.Previous {
			last[p.ID] = p.Checkpoint
		}
		on := ch.allocsOn(n.ID)
		for _, a := range on {
			ch.gone(a, why, -1, last[a.ID])
		}
		c.log.Warn("node identity changed: allocations invalidated", "node", n.ID, "why", why, "invalidated", len(on),
			"old_epoch", n.BootEpoch, "new_epoch", rep.BootEpoch, "old_boot_id", n.BootID, "new_boot_id", rep.BootID,
			"old_uuid", n.NodeUUID, "new_uuid", rep.NodeUUID)
		n.BootEpoch, n.BootID, n.NodeUUID = rep.BootEpoch, rep.BootID, rep.NodeUUID
		n.IdentityChange = &model.IdentityChange{Reason: why, At: ch.now, Invalidated: len(on)}
		n.Health = model.HealthHealthy
	case n.Health == model.HealthUnhealthy && n.Quarantined:
		// NVML failed here: unhealthy until an operator unquarantines.
	case n.Health != model.HealthHealthy:
		n.Health = model.HealthHealthy
		ch.grew = true
	}
	if n.NodeUUID == "" {
		n.NodeUUID = rep.NodeUUID
	}
	if n.BootID == "" {
		n.BootID = rep.BootID
	}
	n.Pod, n.Model, n.GPUs, n.CPUMilli, n.MemoryMiB = rep.Pod, rep.Model, rep.GPUs, rep.CPUMilli, rep.MemoryMiB
	if rep.Pool != "" {
		n.Pool = rep.Pool
	}
	n.Links, n.MIG, n.MIGProfiles = rep.Links, rep.MIG, rep.MIGProfiles
	if n.Pod == "" {
		n.Pod = "default"
	}
	for _, f := range rep.Faults {
		c.fault(ch, n, f)
	}
	c.noteCheckpoints(ch, rep)
	// Which allocations are on the node, read from the cache: loading
	// each one for change (a copy and a precondition each) on every
	// heartbeat was most of a heartbeat's cost on a loaded fleet, and
	// nearly every report says "still running" and changes nothing.
	onNode := make([]bool, len(rep.Allocations))
	ch.c.st.Cache().Read(func(v store.View) {
		for i, r := range rep.Allocations {
			onNode[i] = v.IsOn(n.ID, r.ID)
		}
	})
	for i, r := range rep.Allocations {
		if !onNode[i] || (r.State != model.ActualExited && !ch.newCheckpoint(r.ID, r.Checkpoint)) {
			continue
		}
		a := ch.alloc(r.ID)
		if a == nil {
			continue
		}
		switch {
		case r.State == model.ActualExited && r.AgentStop:
			// The agent stopped all its work to shut down: not the
			// workload's own exit, and not a preemption.
			ch.gone(a, "agent_shutdown", r.ExitCode, r.Checkpoint)
		case r.State == model.ActualExited:
			if j := ch.job(a.OwnerID); j != nil && a.OwnerKind != model.OwnerInference {
				switch {
				case r.Error != "":
					j.Record(ch.now, "agent_refused", a.ID+" on "+a.NodeID+": "+r.Error)
				case r.StartError != "":
					j.Record(ch.now, "start_failed", a.ID+" on "+a.NodeID+": "+r.StartError)
				case r.OOMKilled:
					j.Record(ch.now, "oom_killed", a.ID+" on "+a.NodeID+": the kernel killed it for using more memory than the job asked for")
				}
			}
			ch.gone(a, "exited", r.ExitCode, r.Checkpoint)
		case r.Checkpoint != "" && a.OwnerKind != model.OwnerInference:
			ch.recordCheckpoint(a, r.Checkpoint)
		}
	}
}

// identityChange says how a report's identity differs from the table's
// (R5), "" when it is the same incarnation: a new node UUID is another
// machine, or this one with its state wiped (node_replaced); a new boot
// id or epoch is a reboot (node_rebooted). A field the table does not yet
// hold (a node first seen by an older agent) is taken, not compared.
func identityChange(n *model.Node, rep *model.NodeReport) string {
	switch {
	case n.NodeUUID != "" && rep.NodeUUID != n.NodeUUID:
		return "node_replaced"
	case n.BootEpoch != rep.BootEpoch, n.BootID != "" && rep.BootID != n.BootID:
		return "node_rebooted"
	}
	return ""
}

// fault quarantines per §8: the failure is a property of the hardware,
// not of the job, so the hardware is fenced and the work moves; it is
// never only requeued onto the same GPU.
func (c *Controller) fault(ch *change, n *model.Node, f model.GPUFault) {
	class := model.ClassifyFault(f)
	what := fmt.Sprintf("%s fault", f.Kind)
	if f.XID != 0 {
		what = fmt.Sprintf("XID %d", f.XID)
	}
	if class == model.FaultGPU && (f.GPU < 0 || f.GPU >= n.GPUs) {
		class = model.FaultNode // a fault we cannot pin to a GPU fences the node
	}
	switch class {
	case model.FaultNode:
		n.Quarantined = true
		if f.Kind == "nvml" {
			n.Health = model.HealthUnhealthy
		}
		for _, a := range ch.allocsOn(n.ID) {
			ch.stop(a, "gpu_fault", ch.stopDeadline(a))
		}
		c.log.Warn("node quarantined", "node", n.ID, "fault", what, "message", f.Message)
	case model.FaultGPU:
		bit := model.GPUMask(1) << uint(f.GPU)
		n.QuarantinedGPUs |= bit
		for _, a := range ch.allocsOn(n.ID) {
			if a.GPUs&bit != 0 {
				ch.stop(a, "gpu_fault", ch.stopDeadline(a))
			}
		}
		c.log.Warn("GPU quarantined", "node", n.ID, "gpu", f.GPU, "fault", what, "message", f.Message)
	case model.FaultApp, model.FaultUnknown:
		bit := model.GPUMask(1) << uint(f.GPU)
		for _, a := range ch.allocsOn(n.ID) {
			if a.GPUs&bit != 0 && a.OwnerKind != model.OwnerInference {
				if j := ch.job(a.OwnerID); j != nil {
					j.Record(ch.now, "gpu_error", fmt.Sprintf("%s on %s GPU %d (%s): %s", what, n.ID, f.GPU, class, f.Message))
				}
			}
		}
	}
}

// orders is the desired state of one node as the table has it.
func (c *Controller) orders(node string, fence int64) model.NodeOrders {
	o := model.NodeOrders{NodeID: node, Fence: fence, HeartbeatInterval: c.cfg.HeartbeatInterval,
		Allocations: []model.DesiredAlloc{}}
	c.st.Cache().Read(func(v store.View) {
		if e, ok := v.Get(store.Nodes, node); ok {
			o.BootEpoch = e.Obj.(model.Node).BootEpoch
		}
		ids := v.AllocationIDsOn(node)
		o.Allocations = slices.Grow(o.Allocations, len(ids))
		for _, id := range ids {
			e, ok := v.Get(store.Allocations, id)
			if !ok {
				continue
			}
			a := e.Obj.(model.Allocation)
			d := model.DesiredAlloc{ID: a.ID, OwnerKind: a.OwnerKind, OwnerID: a.OwnerID, Replica: a.Replica,
				GPUs: a.GPUs, GPUMilli: a.GPUMilli, MIGInstance: a.MIGInstance, CPUMilli: a.CPUMilli, MemoryMiB: a.MemoryMiB,
				Stop: a.Stopping, StopDeadline: a.StopDeadline, Kill: a.Killing}
			if a.OwnerKind == model.OwnerInference {
				if e, ok := v.Get(store.Deployments, a.OwnerID); ok {
					d.Workload = e.Obj.(model.Deployment).Workload
				}
			} else if e, ok := v.Get(store.Jobs, a.OwnerID); ok {
				j := e.Obj.(*model.Job)
				d.Workload, d.Restore = j.Workload, j.Run().Restore
				if j.Elastic != nil {
					d.JobGPUs = max(j.Size, 1)
				}
				if j.Checkpoint != nil {
					d.CheckpointDir = j.Checkpoint.Path
				}
			}
			o.Allocations = append(o.Allocations, d)
		}
	})
	return o
}
