package agent

import (
	"fmt"
	"regexp"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// idPattern is what an allocation id may be: it names a directory.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// check decides whether orders may be acted on. Any fault refuses them
// whole: acting on part of a desired state could stop work the rest of it
// wanted kept.
func (a *Agent) check(o model.NodeOrders) error {
	switch {
	case o.NodeID != a.cfg.NodeID:
		return fmt.Errorf("node_id: orders for %q, this is %q", o.NodeID, a.cfg.NodeID)
	case o.BootEpoch != a.epoch:
		return fmt.Errorf("boot_epoch: orders for epoch %d, this agent is epoch %d", o.BootEpoch, a.epoch)
	case o.Fence <= 0:
		return fmt.Errorf("fence: %d: expected the writer's positive fence", o.Fence)
	case o.Fence < a.fence.Load():
		return fmt.Errorf("fence: %d is below %d, already seen: a stale leader", o.Fence, a.fence.Load())
	case o.Allocations == nil:
		return fmt.Errorf("allocations: missing (an empty list means nothing should run)")
	case o.HeartbeatInterval < 0 || o.HeartbeatInterval > 10*time.Minute:
		return fmt.Errorf("heartbeat_interval: %v: expected 0 to 10m", o.HeartbeatInterval)
	}
	all := model.GPUMask(1)<<uint(len(a.inv.Devices)) - 1
	seen := make(map[string]bool, len(o.Allocations))
	for i, d := range o.Allocations {
		switch {
		case !idPattern.MatchString(d.ID):
			return fmt.Errorf("allocations[%d].id: %q: expected letters, digits, '.', '_' or '-'", i, d.ID)
		case seen[d.ID]:
			return fmt.Errorf("allocations[%d].id: %q listed twice", i, d.ID)
		case d.GPUs == 0 || d.GPUs&^all != 0:
			return fmt.Errorf("allocations[%d].gpu_mask: %s: expected GPUs of this node (%s)", i, d.GPUs, all)
		case d.CPUMilli < 0 || d.MemoryMiB < 0:
			return fmt.Errorf("allocations[%d]: negative cpu_milli or memory_mib", i)
		case d.GPUMilli < 0 || d.GPUMilli > 999 || d.GPUMilli > 0 && d.GPUs.Count() != 1:
			return fmt.Errorf("allocations[%d].gpu_milli: %d on %s: expected a share of 1-999 of one GPU", i, d.GPUMilli, d.GPUs)
		}
		switch d.OwnerKind {
		case model.OwnerTraining, model.OwnerInference, model.OwnerBackfill:
		default:
			return fmt.Errorf("allocations[%d].owner_kind: %q: expected training, inference or backfill", i, d.OwnerKind)
		}
		if w := d.Workload; w != nil && len(w.Command) > 0 && w.Command[0] == "" {
			return fmt.Errorf("allocations[%d].workload.command[0]: empty", i)
		}
		seen[d.ID] = true
	}
	return nil
}
