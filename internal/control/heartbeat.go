package control

import (
	"context"
	"errors"
	"fmt"
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
			break
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 8 {
			return model.NodeOrders{}, err
		}
	}
	if m := c.cfg.Metrics; m != nil {
		m.HeartbeatLag(time.Since(t0))
	}
	return c.orders(rep.NodeID, w.Fence()), nil
}

// report applies one node report to a change.
func (c *Controller) report(ch *change, rep *model.NodeReport) {
	n := ch.node(rep.NodeID)
	switch {
	case n == nil:
		// First contact: assume nothing runs there (R5, the safe
		// direction); whatever the agent runs is not in its orders and
		// stops.
		n = ch.newNode(model.Node{ID: rep.NodeID, Health: model.HealthHealthy, BootEpoch: rep.BootEpoch})
		c.log.Info("node joined", "node", rep.NodeID, "epoch", rep.BootEpoch)
	case n.BootEpoch != rep.BootEpoch:
		// Not the machine the allocations were made on: everything on
		// it is gone, whatever the agent believes.
		for _, a := range ch.allocsOn(n.ID) {
			ch.gone(a, "node_restarted", -1, "")
		}
		c.log.Warn("node epoch changed: allocations invalidated", "node", n.ID, "old", n.BootEpoch, "new", rep.BootEpoch)
		n.BootEpoch = rep.BootEpoch
		n.Health = model.HealthHealthy
	case n.Health == model.HealthUnhealthy && n.Quarantined:
		// NVML failed here: unhealthy until an operator unquarantines.
	case n.Health != model.HealthHealthy:
		n.Health = model.HealthHealthy
	}
	n.Pod, n.Model, n.GPUs, n.CPUMilli, n.MemoryMiB = rep.Pod, rep.Model, rep.GPUs, rep.CPUMilli, rep.MemoryMiB
	if rep.Pool != "" {
		n.Pool = rep.Pool
	}
	n.Links, n.MIG = rep.Links, rep.MIG
	if n.Pod == "" {
		n.Pod = "default"
	}
	for _, f := range rep.Faults {
		c.fault(ch, n, f)
	}
	c.noteCheckpoints(ch, rep)
	onNode := map[string]bool{}
	for _, a := range ch.allocsOn(n.ID) {
		onNode[a.ID] = true
	}
	for _, r := range rep.Allocations {
		if r.State != model.ActualExited || !onNode[r.ID] {
			continue
		}
		if a := ch.alloc(r.ID); a != nil {
			ch.gone(a, "exited", r.ExitCode, r.Checkpoint)
		}
	}
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
		for _, a := range v.AllocationsOn(node) {
			d := model.DesiredAlloc{ID: a.ID, OwnerKind: a.OwnerKind, OwnerID: a.OwnerID, Replica: a.Replica,
				GPUs: a.GPUs, GPUMilli: a.GPUMilli, MIGInstance: a.MIGInstance, CPUMilli: a.CPUMilli, MemoryMiB: a.MemoryMiB,
				Stop: a.Stopping, StopDeadline: a.StopDeadline, Kill: a.Killing}
			if a.OwnerKind == model.OwnerInference {
				if e, ok := v.Get(store.Deployments, a.OwnerID); ok {
					d.Workload = e.Obj.(model.Deployment).Workload
				}
			} else if e, ok := v.Get(store.Jobs, a.OwnerID); ok {
				j := e.Obj.(model.Job)
				d.Workload, d.Restore = j.Workload, j.Restore
				if j.Checkpoint != nil {
					d.CheckpointDir = j.Checkpoint.Path
				}
			}
			o.Allocations = append(o.Allocations, d)
		}
	})
	return o
}
