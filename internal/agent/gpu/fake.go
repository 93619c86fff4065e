package gpu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/berthsched/berth/internal/model"
)

// Injection is one fault to inject into a fake backend: a line of JSON in
// its inject file.
//
//	{"gpu": 3, "xid": 48}              an XID on GPU 3
//	{"gpu": 2, "kind": "ecc"}          uncorrectable ECC errors on GPU 2
//	{"gpu": 5, "kind": "lost"}         GPU 5 disappears
//	{"kind": "nvml"}                   NVML itself starts failing
//	{"kind": "nvml", "clear": true}    and recovers
type Injection struct {
	GPU     int    `json:"gpu"`
	XID     int    `json:"xid,omitempty"`
	Kind    string `json:"kind,omitempty"` // xid (default), ecc, lost, nvml
	Message string `json:"message,omitempty"`
	Clear   bool   `json:"clear,omitempty"`
}

// Validate names the field that is wrong.
func (in *Injection) Validate(gpus int) error {
	if in.Kind == "" {
		in.Kind = "xid"
	}
	switch in.Kind {
	case "xid":
		if in.XID <= 0 {
			return fmt.Errorf("xid: %d: expected a positive XID number", in.XID)
		}
	case "ecc", "lost":
	case "nvml":
		in.GPU = -1
		return nil
	default:
		return fmt.Errorf("kind: %q: expected xid, ecc, lost or nvml", in.Kind)
	}
	if in.GPU < 0 || (gpus > 0 && in.GPU >= gpus) {
		return fmt.Errorf("gpu: %d: expected a GPU index 0-%d", in.GPU, gpus-1)
	}
	return nil
}

// Inject appends one injection to a fake backend's inject file. One write
// of one line, so concurrent injectors do not interleave.
func Inject(path string, in Injection) error {
	if err := in.Validate(0); err != nil {
		return err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// FakeConfig describes a fake node.
type FakeConfig struct {
	GPUs      int
	Model     string
	MemoryMiB int64 // per GPU
	// UUIDPrefix makes UUIDs unique across fake nodes on one host.
	UUIDPrefix string
	// InjectFile is polled for injections; empty disables injection.
	InjectFile string
	// MIG partitions GPUs: GPU index → each instance's slices (of 7).
	MIG    map[int][]int
	Logger *slog.Logger
}

// Fake is a backend with no hardware behind it: an NVSwitch-style node
// (every GPU pair linked) whose faults come from its inject file.
type Fake struct {
	cfg FakeConfig

	mu      sync.Mutex
	pending []model.GPUFault
	broken  bool // NVML failing
	taken   int
}

// NewFake builds a fake backend.
func NewFake(cfg FakeConfig) (*Fake, error) {
	if cfg.GPUs < 1 || cfg.GPUs > model.MaxGPUsPerNode {
		return nil, fmt.Errorf("--fake-gpus: %d: expected 1 to %d", cfg.GPUs, model.MaxGPUsPerNode)
	}
	if cfg.Model == "" {
		cfg.Model = "H100"
	}
	if cfg.MemoryMiB == 0 {
		cfg.MemoryMiB = 80 * 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for g, slices := range cfg.MIG {
		if g < 0 || g >= cfg.GPUs {
			return nil, fmt.Errorf("--fake-mig: GPU %d: expected 0 to %d", g, cfg.GPUs-1)
		}
		sum := 0
		for _, n := range slices {
			if n < 1 || n > MIGSlices {
				return nil, fmt.Errorf("--fake-mig: GPU %d: instance of %d slices: expected 1 to %d", g, n, MIGSlices)
			}
			sum += n
		}
		if sum > MIGSlices {
			return nil, fmt.Errorf("--fake-mig: GPU %d: %d slices in all: a GPU has %d", g, sum, MIGSlices)
		}
	}
	return &Fake{cfg: cfg}, nil
}

// Name implements Backend.
func (f *Fake) Name() string { return "fake" }

// Inventory implements Backend.
func (f *Fake) Inventory() (Inventory, error) {
	f.poll()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken {
		return Inventory{}, fmt.Errorf("nvml: Unknown Error (injected)")
	}
	n := f.cfg.GPUs
	inv := Inventory{Model: f.cfg.Model, Devices: make([]Device, n), Links: &model.LinkMatrix{Links: make([][]int, n)}}
	for i := range n {
		inv.Devices[i] = Device{Index: i, UUID: fmt.Sprintf("GPU-%s%08x-fake-%04d", f.cfg.UUIDPrefix, n, i), MemoryMiB: f.cfg.MemoryMiB}
		for k, slices := range f.cfg.MIG[i] {
			inv.Devices[i].MIG = append(inv.Devices[i].MIG, MIGInstance{UUID: fmt.Sprintf("MIG-%s%04d-fake-%d", f.cfg.UUIDPrefix, i, k),
				Slices: slices, MemoryMiB: f.cfg.MemoryMiB * memoryParts(slices) / 8})
		}
		inv.Links.Links[i] = make([]int, n)
		for j := range n {
			if i != j {
				inv.Links.Links[i][j] = 18 // NVLink 4 through NVSwitch
			}
		}
	}
	return inv, nil
}

// Faults implements Backend.
func (f *Fake) Faults() []model.GPUFault {
	f.poll()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.pending
	f.pending = nil
	return out
}

// Close implements Backend.
func (f *Fake) Close() error { return nil }

// poll takes the inject file whole (rename first, so a line appended
// meanwhile lands in a new file) and applies each line.
func (f *Fake) poll() {
	if f.cfg.InjectFile == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.taken++
	taking := fmt.Sprintf("%s.taking.%d", f.cfg.InjectFile, f.taken)
	if err := os.Rename(f.cfg.InjectFile, taking); err != nil {
		return // nothing injected
	}
	defer os.Remove(taking)
	file, err := os.Open(taking)
	if err != nil {
		f.cfg.Logger.Warn("fake GPU: cannot read injections", "err", err)
		return
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var in Injection
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		err := dec.Decode(&in)
		if err == nil {
			err = in.Validate(f.cfg.GPUs)
		}
		if err != nil {
			f.cfg.Logger.Warn("fake GPU: injection ignored", "file", f.cfg.InjectFile, "line", line, "err", err)
			continue
		}
		f.apply(in)
	}
}

func (f *Fake) apply(in Injection) {
	switch in.Kind {
	case "nvml":
		// The agent reports NVML failing when Inventory starts to fail.
		f.broken = !in.Clear
		return
	}
	f.pending = append(f.pending, model.GPUFault{GPU: in.GPU, XID: in.XID, Kind: in.Kind, Message: or(in.Message, "injected")})
	f.cfg.Logger.Info("fake GPU: fault injected", "gpu", in.GPU, "kind", in.Kind, "xid", in.XID)
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ParseMIGLayout reads --fake-mig: "0=3,2,1,1;1=7" partitions GPU 0 into
// instances of 3, 2, 1 and 1 slices and GPU 1 into one of 7.
func ParseMIGLayout(spec string) (map[int][]int, error) {
	out := map[int][]int{}
	for part := range strings.SplitSeq(spec, ";") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		gs, list, ok := strings.Cut(part, "=")
		g, err := strconv.Atoi(strings.TrimSpace(gs))
		if !ok || err != nil {
			return nil, fmt.Errorf("--fake-mig: %q: expected GPU=SLICES,SLICES (e.g. 0=3,2,1,1;1=7)", part)
		}
		if _, dup := out[g]; dup {
			return nil, fmt.Errorf("--fake-mig: GPU %d given twice", g)
		}
		for v := range strings.SplitSeq(list, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("--fake-mig: GPU %d: %q: expected a slice count", g, v)
			}
			out[g] = append(out[g], n)
		}
	}
	return out, nil
}

// memoryParts is a MIG instance's eighths of its GPU's memory, as the
// real profiles have them: 7 compute slices share 8 memory parts, and a
// 3g gets 4 (3g.40gb on an 80 GB GPU), a 7g all 8.
func memoryParts(slices int) int64 {
	switch {
	case slices == 3:
		return 4
	case slices > 4:
		return 8
	}
	return int64(slices)
}
