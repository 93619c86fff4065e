package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/model"
)

// checkAgent is an agent as check sees it: node n1, epoch 3, 8 GPUs,
// fence 5 already seen.
func checkAgent(gpus int) *Agent {
	a := &Agent{cfg: Config{NodeID: "n1"}, epoch: 3}
	a.inv = gpu.Inventory{Devices: make([]gpu.Device, gpus)}
	a.fence.Store(5)
	return a
}

func validAlloc(id string) model.DesiredAlloc {
	return model.DesiredAlloc{ID: id, OwnerKind: model.OwnerTraining, OwnerID: "job-1", GPUs: 0b11,
		Workload: &model.Workload{Command: []string{"/bin/true", "--flag"}}}
}

func validOrders() model.NodeOrders {
	return model.NodeOrders{NodeID: "n1", BootEpoch: 3, Fence: 5,
		Allocations: []model.DesiredAlloc{validAlloc("job-1.r0")}, HeartbeatInterval: 2 * time.Second}
}

func TestCheckOrders(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(o *model.NodeOrders)
		// want is a substring of the error ("" for valid orders); field
		// is the prefix naming what is wrong.
		field, want string
	}{
		{name: "valid", edit: func(o *model.NodeOrders) {}},
		{name: "fence equal to seen", edit: func(o *model.NodeOrders) { o.Fence = 5 }},
		{name: "fence above seen", edit: func(o *model.NodeOrders) { o.Fence = 9 }},
		{name: "empty allocations", edit: func(o *model.NodeOrders) { o.Allocations = []model.DesiredAlloc{} }},
		{name: "heartbeat zero", edit: func(o *model.NodeOrders) { o.HeartbeatInterval = 0 }},
		{name: "heartbeat 10m", edit: func(o *model.NodeOrders) { o.HeartbeatInterval = 10 * time.Minute }},
		{name: "all GPUs", edit: func(o *model.NodeOrders) { o.Allocations[0].GPUs = 0xff }},
		{name: "every owner kind", edit: func(o *model.NodeOrders) {
			o.Allocations = []model.DesiredAlloc{validAlloc("a"), validAlloc("b"), validAlloc("c")}
			o.Allocations[1].OwnerKind = model.OwnerInference
			o.Allocations[2].OwnerKind = model.OwnerBackfill
		}},
		{name: "no workload", edit: func(o *model.NodeOrders) { o.Allocations[0].Workload = nil }},
		{name: "workload without command", edit: func(o *model.NodeOrders) { o.Allocations[0].Workload = &model.Workload{Image: "x"} }},
		{name: "id with dots and dashes", edit: func(o *model.NodeOrders) { o.Allocations[0].ID = "a.b_c-9" }},
		{name: "id 128 chars", edit: func(o *model.NodeOrders) { o.Allocations[0].ID = strings.Repeat("a", 128) }},

		{name: "wrong node", edit: func(o *model.NodeOrders) { o.NodeID = "n2" }, field: "node_id"},
		{name: "empty node", edit: func(o *model.NodeOrders) { o.NodeID = "" }, field: "node_id"},
		{name: "older epoch", edit: func(o *model.NodeOrders) { o.BootEpoch = 2 }, field: "boot_epoch"},
		{name: "newer epoch", edit: func(o *model.NodeOrders) { o.BootEpoch = 4 }, field: "boot_epoch"},
		{name: "fence 0", edit: func(o *model.NodeOrders) { o.Fence = 0 }, field: "fence"},
		{name: "fence negative", edit: func(o *model.NodeOrders) { o.Fence = -1 }, field: "fence"},
		{name: "fence stale", edit: func(o *model.NodeOrders) { o.Fence = 4 }, field: "fence", want: "stale"},
		{name: "allocations nil", edit: func(o *model.NodeOrders) { o.Allocations = nil }, field: "allocations"},
		{name: "heartbeat negative", edit: func(o *model.NodeOrders) { o.HeartbeatInterval = -time.Second }, field: "heartbeat_interval"},
		{name: "heartbeat 11m", edit: func(o *model.NodeOrders) { o.HeartbeatInterval = 11 * time.Minute }, field: "heartbeat_interval"},
		{name: "id empty", edit: func(o *model.NodeOrders) { o.Allocations[0].ID = "" }, field: "allocations[0].id"},
		{name: "id path", edit: func(o *model.NodeOrders) { o.Allocations[0].ID = "../x" }, field: "allocations[0].id"},
		{name: "id slash", edit: func(o *model.NodeOrders) { o.Allocations[0].ID = "a/b" }, field: "allocations[0].id"},
		{name: "id dot", edit: func(o *model.NodeOrders) { o.Allocations[0].ID = "." }, field: "allocations[0].id"},
		{name: "id 129 chars", edit: func(o *model.NodeOrders) { o.Allocations[0].ID = strings.Repeat("a", 129) }, field: "allocations[0].id"},
		{name: "id duplicate", edit: func(o *model.NodeOrders) {
			o.Allocations = append(o.Allocations, validAlloc("job-2.r0"), validAlloc("job-1.r0"))
		}, field: "allocations[2].id", want: "twice"},
		{name: "gpu_mask 0", edit: func(o *model.NodeOrders) { o.Allocations[0].GPUs = 0 }, field: "allocations[0].gpu_mask"},
		{name: "gpu_mask bit 8", edit: func(o *model.NodeOrders) { o.Allocations[0].GPUs = 1 << 8 }, field: "allocations[0].gpu_mask"},
		{name: "gpu_mask bit 8 with others", edit: func(o *model.NodeOrders) { o.Allocations[0].GPUs = 0x1ff }, field: "allocations[0].gpu_mask"},
		{name: "gpu_mask bit 63", edit: func(o *model.NodeOrders) { o.Allocations[0].GPUs = 1 << 63 }, field: "allocations[0].gpu_mask"},
		{name: "negative cpu", edit: func(o *model.NodeOrders) { o.Allocations[0].CPUMilli = -1 }, field: "allocations[0]", want: "cpu_milli"},
		{name: "negative memory", edit: func(o *model.NodeOrders) { o.Allocations[0].MemoryMiB = -1 }, field: "allocations[0]", want: "memory_mib"},
		{name: "owner_kind weird", edit: func(o *model.NodeOrders) { o.Allocations[0].OwnerKind = "weird" }, field: "allocations[0].owner_kind"},
		{name: "owner_kind empty", edit: func(o *model.NodeOrders) { o.Allocations[0].OwnerKind = "" }, field: "allocations[0].owner_kind"},
		{name: "command[0] empty", edit: func(o *model.NodeOrders) {
			o.Allocations[0].Workload = &model.Workload{Command: []string{"", "arg"}}
		}, field: "allocations[0].workload.command[0]"},
		{name: "second alloc bad", edit: func(o *model.NodeOrders) {
			b := validAlloc("job-2.r0")
			b.OwnerKind = "weird"
			o.Allocations = append(o.Allocations, b)
		}, field: "allocations[1].owner_kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := checkAgent(8)
			o := validOrders()
			tc.edit(&o)
			err := firstRefusal(a, o)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("check = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("check = nil, want an error naming %s", tc.field)
			}
			if !strings.HasPrefix(err.Error(), tc.field) {
				t.Errorf("check = %q, want it to start with %q", err, tc.field)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("check = %q, want it to mention %q", err, tc.want)
			}
			if got := a.fence.Load(); got != 5 {
				t.Errorf("check moved the fence to %d; it only reads it", got)
			}
		})
	}
}

// firstRefusal is what check refuses of the orders whole, else the first
// allocation sift refuses alone (the rest are carried out).
func firstRefusal(a *Agent, o model.NodeOrders) error {
	if err := a.check(o); err != nil {
		return err
	}
	if _, errs := a.sift(&o); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// A node with all 64 GPUs accepts every bit of the mask.
func TestCheckOrdersFullNode(t *testing.T) {
	a := checkAgent(model.MaxGPUsPerNode)
	o := validOrders()
	o.Allocations[0].GPUs = 1<<63 | 1
	if err := firstRefusal(a, o); err != nil {
		t.Errorf("check on a 64-GPU node with bit 63 = %v, want nil", err)
	}
	o.Allocations[0].GPUs = ^model.GPUMask(0)
	if err := firstRefusal(a, o); err != nil {
		t.Errorf("check on a 64-GPU node with every bit = %v, want nil", err)
	}
}

// A node whose GPUs are unknown (NVML down at start) has none to give.
func TestCheckOrdersNoGPUs(t *testing.T) {
	a := checkAgent(0)
	o := validOrders()
	if err := firstRefusal(a, o); err == nil || !strings.Contains(err.Error(), "gpu_mask") {
		t.Errorf("check with no GPUs known = %v, want a gpu_mask error", err)
	}
	o.Allocations = []model.DesiredAlloc{}
	if err := a.check(o); err != nil {
		t.Errorf("check of an empty list with no GPUs known = %v, want nil", err)
	}
}
