package control

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadFile: `berth server --config` never panics on any file, and an
// error names the file; what it accepts validates.
func FuzzLoadFile(f *testing.F) {
	f.Add([]byte("scheduler:\n  small_max_gpus: 4\ncontrol:\n  heartbeat_interval: 5s\n"))
	f.Add([]byte("scheduler:\n  pools:\n    inference: 64\n"))
	f.Add([]byte("control: {lost_after: -1s}\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "berth.yaml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg Config
		err := LoadFile(p, &cfg)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := cfg.Sched.Validate(); err != nil {
			t.Fatalf("accepted a config its own check refuses: %v", err)
		}
	})
}
