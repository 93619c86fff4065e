package gpu

import (
	"errors"
	"fmt"
	"strings"

	"github.com/berthsched/berth/internal/model"
)

// Device is one GPU as the backend sees it.
type Device struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	MemoryMiB int64  `json:"memory_mib"`
	// MIG lists the GPU's MIG instances when MIG mode is on; CUDA then
	// runs only on instances, each named by its own UUID.
	MIG []MIGInstance `json:"mig,omitempty"`
	// MIGOffered is the MIG profiles NVML says the GPU can be partitioned
	// into, whether or not MIG mode is on: the names the device plugin
	// advertises (nvidia.com/mig-<profile>) and mig_profile asks for.
	MIGOffered []string `json:"mig_offered,omitempty"`
}

// MIGSlices is how many compute slices a MIG-capable GPU divides into
// (A100, H100, H200: 7).
const MIGSlices = 7

// MIGInstance is one MIG partition of a GPU.
type MIGInstance struct {
	UUID      string `json:"uuid"`
	Slices    int    `json:"slices"` // of MIGSlices
	MemoryMiB int64  `json:"memory_mib"`
	// Name is the instance's profile as NVML names it ("3g.40gb"), empty
	// where NVML did not say.
	Name string `json:"profile,omitempty"`
}

// Milli is the instance's part of its GPU in berth's units: a 3g
// instance of 7 slices is 428 milli.
func (m MIGInstance) Milli() int { return m.Slices * 1000 / MIGSlices }

// Profile is the instance's profile name, "3g.40gb": NVML's, which the
// device plugin's resource names use too, else one made from its slices
// and memory (which may round differently from NVIDIA's table).
func (m MIGInstance) Profile() string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%dg.%dgb", m.Slices, (m.MemoryMiB+512)/1024)
}

// Inventory is what a node has: its GPUs, their model and how they are
// wired together.
type Inventory struct {
	Model   string   `json:"model"`
	Devices []Device `json:"devices"`
	// Links is the NVLink matrix, nil when the backend cannot tell.
	Links *model.LinkMatrix `json:"links,omitempty"`
}

// UUIDs lists the devices' UUIDs by index.
func (inv Inventory) UUIDs() []string {
	out := make([]string, len(inv.Devices))
	for i, d := range inv.Devices {
		out[i] = d.UUID
	}
	return out
}

// MIGLayout is the node's MIG layout as the scheduler takes it
// (model.Node.MIG): per GPU, each instance's milli; nil when no GPU is
// partitioned.
func (inv Inventory) MIGLayout() [][]int { return perInstance(inv, MIGInstance.Milli) }

// MIGProfiles names MIGLayout's instances ("3g.40gb"), in its order.
func (inv Inventory) MIGProfiles() [][]string { return perInstance(inv, MIGInstance.Profile) }

// perInstance is f of each MIG instance, per GPU, up to the last
// partitioned GPU.
func perInstance[T any](inv Inventory, f func(MIGInstance) T) [][]T {
	var out [][]T
	for i, d := range inv.Devices {
		if len(d.MIG) == 0 {
			continue
		}
		for len(out) <= i {
			out = append(out, nil)
		}
		for _, m := range d.MIG {
			out[i] = append(out[i], f(m))
		}
	}
	return out
}

// Backend is a source of GPUs and their faults.
type Backend interface {
	// Name says which backend this is, for logs ("nvml", "fake").
	Name() string
	// Inventory reads the node's GPUs. An error means the management
	// library itself is failing: every GPU is then suspect.
	Inventory() (Inventory, error)
	// Faults returns the faults seen since the last call and forgets
	// them; the caller keeps them until the control plane has them.
	Faults() []model.GPUFault
	// Close releases the library.
	Close() error
}

// ErrNoDriver is returned by Open when there is no NVIDIA driver to talk
// to (and so no real GPUs for this agent).
var ErrNoDriver = errors.New("no NVIDIA driver found (libnvidia-ml.so.1 did not load)")

// ShortModel turns NVML's product name into the model string berth
// schedules by: "NVIDIA H100 80GB HBM3" → "H100", "NVIDIA A100-SXM4-80GB"
// → "A100". Jobs name models in this short form.
func ShortModel(name string) string {
	name = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), "NVIDIA"))
	if i := strings.IndexAny(name, " -"); i > 0 {
		name = name[:i]
	}
	if name == "" {
		return "unknown"
	}
	return name
}
