package control

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadFileSetsEveryKnob: the documented example (docs/config.md) is
// read into the scheduler and loop configuration, and what the file does
// not set keeps the value given.
func TestLoadFileSetsEveryKnob(t *testing.T) {
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "```yaml\n")
	end := strings.Index(doc[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("docs/config.md has no yaml example")
	}
	cfg := Config{StopGrace: 7 * time.Second}
	if err := LoadFile(writeFile(t, doc[start+8:start+8+end]), &cfg); err != nil {
		t.Fatalf("the documented example: %v", err)
	}
	s := cfg.Sched
	checks := map[string]bool{
		"min_runtime 15m":               s.MinRuntime == 15*time.Minute,
		"repeat_min_runtime 12h":        s.RepeatMinRuntime == 12*time.Hour,
		"budget.warn 0.1, page 0.3":     s.Budget.Warn == 0.1 && s.Budget.Page == 0.3,
		"storage.bandwidth 50e9":        s.Storage.Bandwidth == 50e9,
		"storage.min_deadline 45s":      s.Storage.MinDeadline == 45*time.Second,
		"storage.max_deadline 10m":      s.Storage.MaxDeadline == 10*time.Minute,
		"slo.max_gpus 64, 168h":         s.SLO.MaxGPUs == 64 && s.SLO.ScheduleAfter == 168*time.Hour,
		"pools.borrow_max_gpus 32":      s.Pools.BorrowMaxGPUs == 32 && s.Pools.Inference == "inference",
		"standby_replicas 2":            s.Standby == 2,
		"hold_min_gpus 64":              s.HoldMinGPUs == 64 && s.MaxHolds == 1,
		"control.heartbeat_interval 5s": cfg.HeartbeatInterval == 5*time.Second,
		"control.lost_after 1m":         cfg.LostAfter == time.Minute,
		"control.stop_grace 30s":        cfg.StopGrace == 30*time.Second,
		"control.job_retention 24h":     cfg.JobRetention == 24*time.Hour,
		"control.usage_retention 90d":   cfg.UsageRetention == 90*24*time.Hour,
		"control.max_binds_per_pass":    cfg.MaxBindsPerPass == 2000,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s: not loaded: %+v %+v", what, s, cfg)
		}
	}
}

// TestLoadFileNamesTheKey: a typo, a wrong type or a value out of range
// is refused at start with the key it is about.
func TestLoadFileNamesTheKey(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown key", "scheduler:\n  min_runtim: 10m\n", "min_runtim"},
		{"unknown section", "schedular:\n  min_runtime: 10m\n", "schedular"},
		{"not a duration", "scheduler:\n  min_runtime: soon\n", "soon"},
		{"negative duration", "scheduler:\n  min_runtime: -1m\n", "scheduler.min_runtime"},
		{"negative repeat guard", "scheduler:\n  repeat_min_runtime: -1h\n", "scheduler.repeat_min_runtime"},
		{"tiers reversed", "scheduler:\n  budget:\n    warn: 0.5\n    page: 0.2\n", "scheduler.budget.warn"},
		{"page as percent", "scheduler:\n  budget:\n    page: 25\n", "scheduler.budget.page"},
		{"floor above bandwidth", "scheduler:\n  storage:\n    bandwidth: 1e9\n    min_bandwidth: 2e9\n", "scheduler.storage.min_bandwidth"},
		{"fraction", "scheduler:\n  storage:\n    budget_fraction: 2\n", "scheduler.storage.budget_fraction"},
		{"deadline cap under floor", "scheduler:\n  storage:\n    min_deadline: 1m\n    max_deadline: 30s\n", "scheduler.storage.max_deadline"},
		{"frag target", "scheduler:\n  frag_target: 99\n", "scheduler.frag_target"},
		{"negative hold size", "scheduler:\n  hold_min_gpus: -8\n", "scheduler.hold_min_gpus"},
		{"negative bind cap", "control:\n  max_binds_per_pass: -1\n", "control.max_binds_per_pass"},
		{"lost before two beats", "control:\n  heartbeat_interval: 5s\n  lost_after: 6s\n", "control.lost_after"},
		{"quota max under guarantee", "quotas:\n  - scope: ml\n    guaranteed_gpus: 8\n    max_gpus: 4\n", "quotas[0].max_gpus"},
		{"quota key typo", "quotas:\n  - scope: ml\n    guarantee_gpus: 8\n", "guarantee_gpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{}
			err := LoadFile(writeFile(t, tc.body), &cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
			if cfg.Sched.MinRuntime != 0 || cfg.HeartbeatInterval != 0 {
				t.Errorf("a refused file changed the configuration: %+v", cfg)
			}
		})
	}
	if err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml"), &Config{}); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("a missing file: %v, want an error naming --config", err)
	}
}
