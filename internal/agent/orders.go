package agent

import (
	"fmt"
	"regexp"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// idPattern is what an allocation id may be: it names a directory.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// check decides whether orders may be acted on at all: who they are for,
// under which fence. A fault there refuses them whole, since they may not
// be this node's desired state.
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
	return nil
}

// sift takes out of orders the allocations this node cannot run as
// given, and says why for each. One bad allocation is refused alone: the
// rest of the node's desired state is carried out, so a single order no
// agent could act on never stops the node converging (cancelled work
// stopping, new work starting). A refused allocation is reported as
// exited with code 126 and the reason until the control plane lets go
// of it.
func (a *Agent) sift(o *model.NodeOrders) (map[string]string, []error) {
	all := model.GPUMask(1)<<uint(len(a.inv.Devices)) - 1
	seen := make(map[string]bool, len(o.Allocations))
	var refused map[string]string
	var errs []error
	kept := o.Allocations[:0:0]
	for i, d := range o.Allocations {
		if err := checkAlloc(i, d, all, seen); err != nil {
			errs = append(errs, err)
			if d.ID != "" && !seen[d.ID] && len(d.ID) <= 128 {
				if refused == nil {
					refused = map[string]string{}
				}
				refused[d.ID] = err.Error()
			}
			continue
		}
		seen[d.ID] = true
		kept = append(kept, d)
	}
	o.Allocations = kept
	return refused, errs
}

func checkAlloc(i int, d model.DesiredAlloc, all model.GPUMask, seen map[string]bool) error {
	switch {
	case !idPattern.MatchString(d.ID):
		return fmt.Errorf("allocations[%d].id: %q: expected letters, digits, '.', '_' or '-'", i, d.ID)
	case seen[d.ID]:
		return fmt.Errorf("allocations[%d].id: %q listed twice", i, d.ID)
	case d.GPUs == 0 || d.GPUs&^all != 0:
		return fmt.Errorf("allocations[%d].gpu_mask: %s: expected GPUs of this node (%s)", i, d.GPUs, all)
	case d.CPUMilli < 0 || d.MemoryMiB < 0 || d.CPUMilli > model.MaxCPUMilli || d.MemoryMiB > model.MaxMemoryMiB:
		return fmt.Errorf("allocations[%d]: cpu_milli %d, memory_mib %d: expected 0 to %d and 0 to %d", i, d.CPUMilli, d.MemoryMiB, int64(model.MaxCPUMilli), int64(model.MaxMemoryMiB))
	case d.GPUMilli < 0 || d.GPUMilli > 999 || d.GPUMilli > 0 && d.GPUs.Count() != 1:
		return fmt.Errorf("allocations[%d].gpu_milli: %d on %s: expected a share of 1-999 of one GPU", i, d.GPUMilli, d.GPUs)
	}
	switch d.OwnerKind {
	case model.OwnerTraining, model.OwnerInference, model.OwnerBackfill:
	default:
		return fmt.Errorf("allocations[%d].owner_kind: %q: expected training, inference or backfill", i, d.OwnerKind)
	}
	if w := d.Workload; w != nil {
		if err := w.Validate(fmt.Sprintf("allocations[%d].workload.", i)); err != nil && (len(w.Command) > 0 || w.Image != "") {
			return err
		}
	}
	return nil
}
