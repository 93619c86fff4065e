package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// File is `berth server --config`'s file: the scheduling policy (every
// sched.Config knob, under the names docs/config.md lists) and the
// control loop's timings. Keys it does not know are errors, so a typo is
// never silently a default.
type File struct {
	Scheduler sched.Config `yaml:"scheduler"`
	Control   controlFile  `yaml:"control"`
	// Quotas is `berth kube`'s quota tree (docs/kubernetes.md); the
	// server keeps its quotas in its table (PUT /v1/quotas) and refuses
	// them here.
	Quotas []quotaFile `yaml:"quotas"`
}

type quotaFile struct {
	Scope          string `yaml:"scope"`
	GuaranteedGPUs int    `yaml:"guaranteed_gpus"`
	MaxGPUs        int    `yaml:"max_gpus"`
}

type controlFile struct {
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	SuspectAfter      time.Duration `yaml:"suspect_after"`
	LostAfter         time.Duration `yaml:"lost_after"`
	StopGrace         time.Duration `yaml:"stop_grace"`
	MassLossFraction  float64       `yaml:"mass_loss_fraction"`
	JobRetention      time.Duration `yaml:"job_retention"`
	UsageRetention    time.Duration `yaml:"usage_retention"`
	MaxBindsPerPass   int           `yaml:"max_binds_per_pass"`
}

// LoadFile reads and validates a config file into cfg (which keeps what
// the file does not set), naming the key of the first error.
func LoadFile(path string, cfg *Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Scheduler.Validate(); err != nil {
		return fmt.Errorf("%s: scheduler.%w", path, err)
	}
	var quotas []model.Quota
	for i, q := range f.Quotas {
		mq := model.Quota{Scope: q.Scope, GuaranteedGPUs: q.GuaranteedGPUs, MaxGPUs: q.MaxGPUs}
		if err := mq.Validate(); err != nil {
			return fmt.Errorf("%s: quotas[%d].%w", path, i, err)
		}
		quotas = append(quotas, mq)
	}
	c := f.Control
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"heartbeat_interval", c.HeartbeatInterval}, {"suspect_after", c.SuspectAfter}, {"lost_after", c.LostAfter}, {"stop_grace", c.StopGrace},
		{"job_retention", c.JobRetention}, {"usage_retention", c.UsageRetention}} {
		if d.v < 0 {
			return fmt.Errorf("%s: control.%s: %v: must not be negative", path, d.key, d.v)
		}
	}
	if c.MaxBindsPerPass < 0 {
		return fmt.Errorf("%s: control.max_binds_per_pass: %d: expected a positive number of allocations (0 or unset: %d)", path, c.MaxBindsPerPass, DefaultMaxBindsPerPass)
	}
	if c.MassLossFraction < 0 || c.MassLossFraction > 1 {
		return fmt.Errorf("%s: control.mass_loss_fraction: %g: expected a fraction between 0 and 1", path, c.MassLossFraction)
	}
	if c.HeartbeatInterval > 0 && c.LostAfter > 0 && c.LostAfter < 2*c.HeartbeatInterval {
		return fmt.Errorf("%s: control.lost_after: %v is under two heartbeat intervals (%v): every node would be lost", path, c.LostAfter, c.HeartbeatInterval)
	}
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&cfg.JobRetention, c.JobRetention)
	set(&cfg.UsageRetention, c.UsageRetention)
	if err := cfg.CheckRetention(); err != nil {
		return fmt.Errorf("%s: control.%w", path, err)
	}
	cfg.Sched = f.Scheduler
	cfg.Quotas = quotas
	set(&cfg.HeartbeatInterval, c.HeartbeatInterval)
	set(&cfg.SuspectAfter, c.SuspectAfter)
	set(&cfg.LostAfter, c.LostAfter)
	set(&cfg.StopGrace, c.StopGrace)
	if c.MassLossFraction > 0 {
		cfg.MassLossFraction = c.MassLossFraction
	}
	if c.MaxBindsPerPass > 0 {
		cfg.MaxBindsPerPass = c.MaxBindsPerPass
	}
	return nil
}
