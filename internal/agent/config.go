package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
)

// Config is one agent's settings; `berth agent` fills it from flags.
type Config struct {
	// Servers are the control plane's addresses; the agent moves to the
	// next (or to the leader a follower names) when one fails.
	Servers []string
	Token   string
	NodeID  string
	Pod     string
	Pool    string
	// Model overrides the model the backend reports.
	Model    string
	StateDir string
	Backend  gpu.Backend
	// Interval between heartbeats until the control plane names its own.
	Interval time.Duration
	// CPUMilli and MemoryMiB override the host's (fake fleets on one host).
	CPUMilli, MemoryMiB int64
	// LogMaxBytes caps each of an allocation's stdout and stderr logs.
	LogMaxBytes int64
	// LogRetention is how long an allocation's directory, and its logs,
	// are kept after the control plane released it; default 72 h.
	LogRetention time.Duration
	// OrphanGrace is the deadline for allocations the control plane no
	// longer lists, and for processes an earlier incarnation left behind.
	OrphanGrace time.Duration
	// StrayGrace is how long processes left in a group after its leader
	// exited get between SIGTERM and SIGKILL.
	StrayGrace time.Duration
	// Cgroups asks for per-allocation cgroup v2 limits; CgroupRoot is
	// the delegated cgroup (the agent's own when empty).
	Cgroups    bool
	CgroupRoot string
	// Shim is the binary each workload's shim runs from (it must call
	// MaybeShim first thing); the agent's own executable when empty.
	Shim string
	// Container is how workloads that name an image run (container.go).
	Container ContainerConfig
	// BootID overrides the kernel's boot id: tests stand in for a reboot
	// with it. Empty: /proc/sys/kernel/random/boot_id.
	BootID string
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	switch {
	case len(c.Servers) == 0:
		return errors.New("--server: required: the berth server's address (or set BERTH_ADDR)")
	case c.NodeID == "":
		return errors.New("--node-id: required")
	case c.Backend == nil:
		return errors.New("no GPU backend")
	case c.Interval < 0:
		return fmt.Errorf("--heartbeat-interval: %v: must be positive", c.Interval)
	}
	if c.Interval == 0 {
		c.Interval = 5 * time.Second
	}
	if c.Pod == "" {
		c.Pod = "default"
	}
	if c.LogMaxBytes == 0 {
		c.LogMaxBytes = 64 << 20
	}
	if c.LogRetention == 0 {
		c.LogRetention = 72 * time.Hour
	}
	if c.OrphanGrace == 0 {
		c.OrphanGrace = 30 * time.Second
	}
	if c.StrayGrace == 0 {
		c.StrayGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c.Container.defaults()
}
