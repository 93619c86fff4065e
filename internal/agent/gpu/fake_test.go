package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berthsched/berth/internal/model"
)

func TestNewFakeValidation(t *testing.T) {
	for _, tc := range []struct {
		gpus    int
		wantErr bool
	}{
		{-1, true}, {0, true}, {1, false}, {8, false}, {64, false}, {65, true},
	} {
		t.Run("", func(t *testing.T) {
			f, err := NewFake(FakeConfig{GPUs: tc.gpus})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("NewFake(gpus=%d) = nil error, want one", tc.gpus)
				}
				if !strings.Contains(err.Error(), "--fake-gpus") {
					t.Errorf("NewFake(gpus=%d) error %q does not name --fake-gpus", tc.gpus, err)
				}
				return
			}
			if err != nil || f == nil {
				t.Fatalf("NewFake(gpus=%d) = %v, %v; want a fake", tc.gpus, f, err)
			}
			if f.Name() != "fake" {
				t.Errorf("Name() = %q, want fake", f.Name())
			}
		})
	}
}

func newFake(t *testing.T, gpus int, inject string) *Fake {
	t.Helper()
	f, err := NewFake(FakeConfig{GPUs: gpus, UUIDPrefix: "node7-", InjectFile: inject})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFakeInventory(t *testing.T) {
	f := newFake(t, 8, "")
	inv, err := f.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if inv.Model != "H100" {
		t.Errorf("Model = %q, want the default H100", inv.Model)
	}
	if len(inv.Devices) != 8 {
		t.Fatalf("%d devices, want 8", len(inv.Devices))
	}
	seen := map[string]bool{}
	for i, d := range inv.Devices {
		if d.Index != i {
			t.Errorf("device %d has Index %d", i, d.Index)
		}
		if !strings.Contains(d.UUID, "node7-") {
			t.Errorf("device %d UUID %q lacks the prefix node7-", i, d.UUID)
		}
		if seen[d.UUID] {
			t.Errorf("device %d UUID %q repeats", i, d.UUID)
		}
		seen[d.UUID] = true
		if d.MemoryMiB != 80*1024 {
			t.Errorf("device %d MemoryMiB = %d, want %d", i, d.MemoryMiB, 80*1024)
		}
	}
	if diff := cmp.Diff(inv.UUIDs(), func() []string {
		out := make([]string, len(inv.Devices))
		for i, d := range inv.Devices {
			out[i] = d.UUID
		}
		return out
	}()); diff != "" {
		t.Errorf("UUIDs() differ from the devices' (-got +want):\n%s", diff)
	}
	if inv.Links == nil || len(inv.Links.Links) != 8 {
		t.Fatalf("Links = %+v, want an 8x8 matrix", inv.Links)
	}
	m := inv.Links.Links
	for i := range 8 {
		if len(m[i]) != 8 {
			t.Fatalf("row %d has %d entries, want 8", i, len(m[i]))
		}
		if m[i][i] != 0 {
			t.Errorf("Links[%d][%d] = %d, want 0 on the diagonal", i, i, m[i][i])
		}
		for j := range 8 {
			if m[i][j] != m[j][i] {
				t.Errorf("Links[%d][%d] = %d but Links[%d][%d] = %d: not symmetric", i, j, m[i][j], j, i, m[j][i])
			}
			if i != j && m[i][j] <= 0 {
				t.Errorf("Links[%d][%d] = %d, want every pair linked", i, j, m[i][j])
			}
		}
	}

	// Two fakes with different prefixes do not share UUIDs.
	g, err := NewFake(FakeConfig{GPUs: 8, UUIDPrefix: "node8-"})
	if err != nil {
		t.Fatal(err)
	}
	inv2, err := g.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range inv2.Devices {
		if seen[d.UUID] {
			t.Errorf("UUID %q appears on two fake nodes with different prefixes", d.UUID)
		}
	}
}

func TestFakeModelOverride(t *testing.T) {
	f, err := NewFake(FakeConfig{GPUs: 2, Model: "A100", MemoryMiB: 40 * 1024})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := f.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if inv.Model != "A100" || inv.Devices[0].MemoryMiB != 40*1024 {
		t.Errorf("inventory = %+v, want model A100 with 40960 MiB", inv)
	}
}

func TestFakeInjectFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Injection
		want model.GPUFault
	}{
		{"xid", Injection{GPU: 3, XID: 48}, model.GPUFault{GPU: 3, XID: 48, Kind: "xid", Message: "injected"}},
		{"xid with message", Injection{GPU: 0, XID: 79, Message: "fell off the bus"}, model.GPUFault{GPU: 0, XID: 79, Kind: "xid", Message: "fell off the bus"}},
		{"ecc", Injection{GPU: 2, Kind: "ecc"}, model.GPUFault{GPU: 2, Kind: "ecc", Message: "injected"}},
		{"lost", Injection{GPU: 7, Kind: "lost"}, model.GPUFault{GPU: 7, Kind: "lost", Message: "injected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "inject")
			f := newFake(t, 8, path)
			if got := f.Faults(); len(got) != 0 {
				t.Fatalf("Faults() before injecting = %+v, want none", got)
			}
			if err := Inject(path, tc.in); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]model.GPUFault{tc.want}, f.Faults()); diff != "" {
				t.Errorf("first Faults() (-want +got):\n%s", diff)
			}
			if got := f.Faults(); len(got) != 0 {
				t.Errorf("second Faults() = %+v, want none: a fault is reported once", got)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("inject file still there after polling (stat err %v)", err)
			}
			left, _ := filepath.Glob(path + ".taking.*")
			if len(left) != 0 {
				t.Errorf("taken files left behind: %v", left)
			}
		})
	}
}

func TestFakeInjectSeveralInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inject")
	f := newFake(t, 8, path)
	for _, in := range []Injection{{GPU: 1, XID: 31}, {GPU: 4, Kind: "ecc"}, {GPU: 1, XID: 43}} {
		if err := Inject(path, in); err != nil {
			t.Fatal(err)
		}
	}
	want := []model.GPUFault{
		{GPU: 1, XID: 31, Kind: "xid", Message: "injected"},
		{GPU: 4, Kind: "ecc", Message: "injected"},
		{GPU: 1, XID: 43, Kind: "xid", Message: "injected"},
	}
	if diff := cmp.Diff(want, f.Faults()); diff != "" {
		t.Errorf("Faults() (-want +got):\n%s", diff)
	}
}

func TestFakeInjectNVML(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inject")
	f := newFake(t, 8, path)
	if _, err := f.Inventory(); err != nil {
		t.Fatalf("Inventory before injecting: %v", err)
	}
	if err := Inject(path, Injection{Kind: "nvml"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := f.Inventory(); err == nil {
			t.Fatalf("Inventory call %d after nvml injection succeeded, want an error", i+1)
		}
	}
	if got := f.Faults(); len(got) != 0 {
		t.Errorf("Faults() = %+v: an nvml injection is reported through Inventory, not as a fault", got)
	}
	if err := Inject(path, Injection{Kind: "nvml", Clear: true}); err != nil {
		t.Fatal(err)
	}
	inv, err := f.Inventory()
	if err != nil {
		t.Fatalf("Inventory after clearing nvml: %v", err)
	}
	if len(inv.Devices) != 8 {
		t.Errorf("%d devices after recovery, want 8", len(inv.Devices))
	}
}

func TestFakeInjectMalformedLinesIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inject")
	f := newFake(t, 8, path)
	lines := []string{
		`{"gpu": 1, "xid": 13}`,
		`not json at all`,
		`{"gpu": 2, "xid": 48, "colour": "red"}`, // unknown field
		`{"gpu": 8, "xid": 48}`,                  // out of range for 8 GPUs
		`{"gpu": -1, "kind": "ecc"}`,             // negative
		`{"gpu": 2, "kind": "melted"}`,           // unknown kind
		`{"gpu": 2, "xid": 0}`,                   // xid 0
		`{"gpu": 2}`,                             // xid by default, none given
		``,
		`   `,
		`{"gpu": 6, "kind": "lost"}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []model.GPUFault{
		{GPU: 1, XID: 13, Kind: "xid", Message: "injected"},
		{GPU: 6, Kind: "lost", Message: "injected"},
	}
	if diff := cmp.Diff(want, f.Faults()); diff != "" {
		t.Errorf("Faults() (-want +got):\n%s", diff)
	}
	if _, err := f.Inventory(); err != nil {
		t.Errorf("Inventory: %v; no malformed line should break NVML", err)
	}
}

func TestFakeNoInjectFile(t *testing.T) {
	// A configured inject file that does not exist yet means nothing injected.
	f := newFake(t, 4, filepath.Join(t.TempDir(), "absent"))
	if got := f.Faults(); len(got) != 0 {
		t.Errorf("Faults() = %+v, want none", got)
	}
	if _, err := f.Inventory(); err != nil {
		t.Errorf("Inventory: %v", err)
	}
}

func TestInjectionValidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       Injection
		gpus     int
		field    string // "" for valid
		wantKind string
		wantGPU  int
	}{
		{name: "xid default kind", in: Injection{GPU: 3, XID: 48}, gpus: 8, wantKind: "xid", wantGPU: 3},
		{name: "xid zero", in: Injection{GPU: 3}, gpus: 8, field: "xid"},
		{name: "xid negative", in: Injection{GPU: 3, XID: -2, Kind: "xid"}, gpus: 8, field: "xid"},
		{name: "unknown kind", in: Injection{GPU: 3, Kind: "fire"}, gpus: 8, field: "kind"},
		{name: "gpu too high", in: Injection{GPU: 8, Kind: "ecc"}, gpus: 8, field: "gpu"},
		{name: "gpu negative", in: Injection{GPU: -1, Kind: "lost"}, gpus: 8, field: "gpu"},
		{name: "gpu negative unknown count", in: Injection{GPU: -1, XID: 48}, gpus: 0, field: "gpu"},
		{name: "gpu any with unknown count", in: Injection{GPU: 63, Kind: "ecc"}, gpus: 0, wantKind: "ecc", wantGPU: 63},
		{name: "last gpu", in: Injection{GPU: 7, Kind: "lost"}, gpus: 8, wantKind: "lost", wantGPU: 7},
		{name: "nvml ignores gpu", in: Injection{GPU: 99, Kind: "nvml"}, gpus: 8, wantKind: "nvml", wantGPU: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			err := in.Validate(tc.gpus)
			if tc.field != "" {
				if err == nil {
					t.Fatalf("Validate(%+v) = nil, want an error naming %s", tc.in, tc.field)
				}
				if !strings.HasPrefix(err.Error(), tc.field+":") {
					t.Errorf("Validate(%+v) = %q, want it to start with %q", tc.in, err, tc.field+":")
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate(%+v) = %v, want nil", tc.in, err)
			}
			if in.Kind != tc.wantKind || in.GPU != tc.wantGPU {
				t.Errorf("after Validate: kind %q gpu %d, want kind %q gpu %d", in.Kind, in.GPU, tc.wantKind, tc.wantGPU)
			}
		})
	}
}

func TestInjectRejectsInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inject")
	if err := Inject(path, Injection{GPU: 1, Kind: "bogus"}); err == nil || !strings.Contains(err.Error(), "kind") {
		t.Errorf("Inject(bogus kind) = %v, want an error naming kind", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Inject wrote the file for an invalid injection (stat err %v)", err)
	}
}

func TestShortModel(t *testing.T) {
	for in, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":    "H100",
		"NVIDIA A100-SXM4-80GB":    "A100",
		"NVIDIA H200":              "H200",
		"  NVIDIA H100 PCIe  ":     "H100",
		"NVIDIA":                   "unknown",
		"":                         "unknown",
		"   ":                      "unknown",
		"Tesla V100-SXM2-16GB":     "Tesla",
		"NVIDIA GeForce RTX 4090":  "GeForce",
		"NVIDIA L40S":              "L40S",
		"NVIDIA B200":              "B200",
		"NVIDIA H100-SXM5-80GB-x2": "H100",
	} {
		t.Run(in, func(t *testing.T) {
			if got := ShortModel(in); got != want {
				t.Errorf("ShortModel(%q) = %q, want %q", in, got, want)
			}
		})
	}
}

func TestFakeMIG(t *testing.T) {
	layout, err := ParseMIGLayout("0=3,2,1,1; 2=7")
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFake(FakeConfig{GPUs: 3, MIG: layout})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := f.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int
	for _, d := range inv.Devices {
		var s []int
		for _, m := range d.MIG {
			s = append(s, m.Milli())
			if !strings.HasPrefix(m.UUID, "MIG-") {
				t.Errorf("instance UUID %q: want MIG-…", m.UUID)
			}
		}
		got = append(got, s)
	}
	if want := [][]int{{428, 285, 142, 142}, nil, {1000}}; !cmp.Equal(got, want) {
		t.Fatalf("instances in milli %v, want %v", got, want)
	}
	// What the heartbeat carries: milli and profile per instance, in one
	// order, up to the last partitioned GPU.
	if want := [][]int{{428, 285, 142, 142}, nil, {1000}}; !cmp.Equal(inv.MIGLayout(), want) {
		t.Fatalf("MIGLayout %v, want %v", inv.MIGLayout(), want)
	}
	if got, want := inv.MIGProfiles(), [][]string{{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, nil, {"7g.80gb"}}; !cmp.Equal(got, want) {
		t.Fatalf("MIGProfiles %v, want %v", got, want)
	}
	for spec, field := range map[string]string{"0=8": "1 to 7", "0=4,4": "8 slices", "5=1": "GPU 5", "x=1": "expected GPU=SLICES", "0=a": "slice count", "0=1;0=2": "twice", "0=0": "1 to 7"} {
		l, err := ParseMIGLayout(spec)
		if err == nil {
			_, err = NewFake(FakeConfig{GPUs: 3, MIG: l})
		}
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "--fake-mig") {
			t.Errorf("%q: error %v, want one naming --fake-mig and %q", spec, err, field)
		}
	}
}

// NVML's profile name wins over one made from slices and memory, which
// rounds differently from NVIDIA's table for some instances.
func TestMIGProfileName(t *testing.T) {
	m := MIGInstance{Slices: 3, MemoryMiB: 40192}
	if got := m.Profile(); got != "3g.39gb" {
		t.Fatalf("made from slices and memory: %q", got)
	}
	m.Name = "3g.40gb"
	if got := m.Profile(); got != "3g.40gb" {
		t.Fatalf("with NVML's name: %q", got)
	}
}
