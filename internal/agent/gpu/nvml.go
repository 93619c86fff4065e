//go:build linux && cgo

package gpu

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/berthsched/berth/internal/model"
)

// NVML is the real backend. Discovery reads NVML once per call (cheap:
// a few hundred microseconds on an 8-GPU node); XIDs arrive on an NVML
// event set watched by one goroutine; ECC counters are compared with the
// last reading on every Faults call.
type NVML struct {
	log *slog.Logger

	mu      sync.Mutex
	pending []model.GPUFault
	ecc     map[int]uint64
	lost    map[int]bool

	stop chan struct{}
	done chan struct{}
}

// OpenNVML loads the driver library. ErrNoDriver means there is none.
func OpenNVML(log *slog.Logger) (*NVML, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND || ret == nvml.ERROR_DRIVER_NOT_LOADED {
			return nil, fmt.Errorf("%w: %v", ErrNoDriver, nvml.ErrorString(ret))
		}
		return nil, fmt.Errorf("nvml init: %v", nvml.ErrorString(ret))
	}
	b := &NVML{log: log, ecc: map[int]uint64{}, lost: map[int]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	set, ret := nvml.EventSetCreate()
	if ret != nvml.SUCCESS {
		log.Warn("nvml: no event set; XIDs will not be seen", "err", nvml.ErrorString(ret))
		close(b.done)
		return b, nil
	}
	n, _ := nvml.DeviceGetCount()
	for i := range n {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		if ret := d.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			log.Warn("nvml: cannot watch XIDs", "gpu", i, "err", nvml.ErrorString(ret))
		}
		if c, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
			b.ecc[i] = c
		}
	}
	go b.watch(set)
	return b, nil
}

// watch turns XID events into faults until Close.
func (b *NVML) watch(set nvml.EventSet) {
	defer close(b.done)
	defer set.Free()
	for {
		select {
		case <-b.stop:
			return
		default:
		}
		ev, ret := set.Wait(1000)
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_TIMEOUT:
			continue
		default:
			b.add(model.GPUFault{GPU: -1, Kind: "nvml", Message: "event wait: " + nvml.ErrorString(ret)})
			time.Sleep(time.Second)
			continue
		}
		if ev.EventType != nvml.EventTypeXidCriticalError {
			continue
		}
		idx := -1
		if ev.Device != nil {
			if i, ret := ev.Device.GetIndex(); ret == nvml.SUCCESS {
				idx = i
			}
		}
		b.add(model.GPUFault{GPU: idx, XID: int(ev.EventData), Kind: "xid", Message: fmt.Sprintf("XID %d from NVML", ev.EventData)})
	}
}

func (b *NVML) add(f model.GPUFault) {
	b.mu.Lock()
	b.pending = append(b.pending, f)
	b.mu.Unlock()
	b.log.Warn("GPU fault", "gpu", f.GPU, "kind", f.Kind, "xid", f.XID, "message", f.Message)
}

// Name implements Backend.
func (b *NVML) Name() string { return "nvml" }

// Inventory implements Backend.
func (b *NVML) Inventory() (Inventory, error) {
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return Inventory{}, fmt.Errorf("nvml device count: %v", nvml.ErrorString(ret))
	}
	if n == 0 {
		return Inventory{}, errors.New("nvml reports no GPUs")
	}
	inv := Inventory{Devices: make([]Device, n)}
	bus := map[string]int{}
	handles := make([]nvml.Device, n)
	for i := range n {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return Inventory{}, fmt.Errorf("nvml GPU %d: %v", i, nvml.ErrorString(ret))
		}
		handles[i] = d
		dev := Device{Index: i}
		if dev.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return Inventory{}, fmt.Errorf("nvml GPU %d uuid: %v", i, nvml.ErrorString(ret))
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			dev.MemoryMiB = int64(mem.Total >> 20)
		}
		if name, ret := d.GetName(); ret == nvml.SUCCESS && inv.Model == "" {
			inv.Model = ShortModel(name)
		}
		if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			bus[busID(pci)] = i
		}
		if dev.MIG, ret = migInstances(d); ret != nvml.SUCCESS {
			return Inventory{}, fmt.Errorf("nvml GPU %d MIG instances: %v", i, nvml.ErrorString(ret))
		}
		dev.MIGOffered = offeredProfiles(d)
		inv.Devices[i] = dev
	}
	inv.Links = links(handles, bus)
	return inv, nil
}

// migInstances lists a GPU's MIG instances; none when the GPU has no
// MIG mode or has it off. The mode is only read: partitioning a GPU is
// the operator's choice (nvidia-smi mig), made before berth places work.
func migInstances(d nvml.Device) ([]MIGInstance, nvml.Return) {
	mode, _, ret := d.GetMigMode()
	if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.SUCCESS && mode != nvml.DEVICE_MIG_ENABLE {
		return nil, nvml.SUCCESS
	}
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	n, ret := d.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	var out []MIGInstance
	for k := range n {
		m, ret := d.GetMigDeviceHandleByIndex(k)
		if ret == nvml.ERROR_NOT_FOUND {
			continue // no instance in this slot
		}
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		uuid, ret := m.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		at, ret := m.GetAttributes()
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		out = append(out, MIGInstance{UUID: uuid, Slices: int(at.GpuInstanceSliceCount), MemoryMiB: int64(at.MemorySizeMB),
			Name: profileName(d, m)})
	}
	return out, nvml.SUCCESS
}

// profileName is MIG device m's GPU instance profile as NVML names it
// ("MIG 3g.40gb" → "3g.40gb"); "" when any step is refused, and Profile
// then makes one from the slices and memory.
func profileName(d, m nvml.Device) string {
	id, ret := m.GetGpuInstanceId()
	if ret != nvml.SUCCESS {
		return ""
	}
	gi, ret := d.GetGpuInstanceById(id)
	if ret != nvml.SUCCESS {
		return ""
	}
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return ""
	}
	return profileInfoName(d, int(info.ProfileId))
}

// offeredProfiles is every GPU instance profile NVML offers on d, by
// name; nil on a GPU without MIG.
func offeredProfiles(d nvml.Device) []string {
	if _, _, ret := d.GetMigMode(); ret != nvml.SUCCESS {
		return nil
	}
	var out []string
	for id := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		if name := profileInfoName(d, id); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// profileInfoName is GPU instance profile id's name on d, "" when NVML
// has no such profile there.
func profileInfoName(d nvml.Device, id int) string {
	p, ret := d.GetGpuInstanceProfileInfoV(id).V2()
	if ret != nvml.SUCCESS {
		return ""
	}
	b := make([]byte, 0, len(p.Name))
	for _, c := range p.Name {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return strings.TrimPrefix(string(b), "MIG ")
}

// links counts active NVLinks between each GPU pair by following every
// link to the PCI address at its far end. Links to NVSwitches (whose
// addresses are not GPUs) count for every GPU pair on the same switch
// fabric, which is how HGX boards wire all-to-all. Nil when no GPU has an
// active NVLink (PCIe-only nodes).
func links(handles []nvml.Device, bus map[string]int) *model.LinkMatrix {
	n := len(handles)
	m := make([][]int, n)
	for i := range m {
		m[i] = make([]int, n)
	}
	switched := make([]int, n) // links each GPU has into the switch fabric
	any := false
	for i, d := range handles {
		for l := range nvml.NVLINK_MAX_LINKS {
			st, ret := d.GetNvLinkState(l)
			if ret != nvml.SUCCESS {
				break // past the last link this GPU has
			}
			if st != nvml.FEATURE_ENABLED {
				continue
			}
			remote, ret := d.GetNvLinkRemotePciInfo(l)
			if ret != nvml.SUCCESS {
				continue
			}
			any = true
			if j, ok := bus[busID(remote)]; ok && j != i {
				m[i][j]++
			} else {
				switched[i]++
			}
		}
	}
	if !any {
		return nil
	}
	for i := range n {
		for j := range n {
			if i != j && switched[i] > 0 && switched[j] > 0 {
				m[i][j] += min(switched[i], switched[j])
			}
		}
	}
	// Direct links are counted from both ends; keep the matrix symmetric
	// even if one end failed to answer.
	for i := range n {
		for j := i + 1; j < n; j++ {
			v := max(m[i][j], m[j][i])
			m[i][j], m[j][i] = v, v
		}
	}
	return &model.LinkMatrix{Links: m}
}

func busID(p nvml.PciInfo) string {
	var sb strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return strings.ToLower(sb.String())
}

// Faults implements Backend: the XIDs seen, plus ECC counters that grew
// and GPUs that NVML reports lost since the last call.
func (b *NVML) Faults() []model.GPUFault {
	n, ret := nvml.DeviceGetCount()
	if ret == nvml.SUCCESS {
		for i := range n {
			d, ret := nvml.DeviceGetHandleByIndex(i)
			if ret == nvml.ERROR_GPU_IS_LOST {
				b.mu.Lock()
				seen := b.lost[i]
				b.lost[i] = true
				b.mu.Unlock()
				if !seen {
					b.add(model.GPUFault{GPU: i, Kind: "lost", Message: "NVML: GPU is lost"})
				}
				continue
			}
			if ret != nvml.SUCCESS {
				continue
			}
			c, ret := d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
			if ret != nvml.SUCCESS {
				continue
			}
			b.mu.Lock()
			prev, known := b.ecc[i]
			b.ecc[i] = c
			b.mu.Unlock()
			if known && c > prev {
				b.add(model.GPUFault{GPU: i, Kind: "ecc", Message: fmt.Sprintf("%d new uncorrectable ECC errors", c-prev)})
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.pending
	b.pending = nil
	return out
}

// Close implements Backend.
func (b *NVML) Close() error {
	close(b.stop)
	<-b.done
	if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %v", nvml.ErrorString(ret))
	}
	return nil
}
