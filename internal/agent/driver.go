package agent

import (
	"os"
	"path/filepath"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/model"
)

// A driver turns an allocation's workload into what its shim runs. The
// shim, the pid file a restarted agent adopts, the log files and the stop
// sequence are the same for every driver; drivers differ in what the
// shim starts and in whether something outlives the process group.
type driver interface {
	// prepare readies the allocation directory for the shim and returns
	// the shim's arguments.
	prepare(d model.DesiredAlloc, dir string, env []string, mig *gpu.MIGInstance) ([]string, error)
	// container is the container an allocation runs in, "" for none:
	// it is stopped and removed beyond the process group, and it enforces
	// the request's CPU and memory itself (the agent's cgroup would hold
	// only its client).
	container(alloc string) string
}

// driverFor picks a workload's driver: an image runs in a container,
// anything else is a command.
func (a *Agent) driverFor(w *model.Workload) driver {
	if w.Image != "" {
		return containerDriver{a}
	}
	return execDriver{}
}

// execDriver runs the workload's command as the shim's child.
type execDriver struct{}

func (execDriver) prepare(d model.DesiredAlloc, dir string, _ []string, _ *gpu.MIGInstance) ([]string, error) {
	return d.Workload.Command, os.Remove(filepath.Join(dir, containerFile))
}

func (execDriver) container(string) string { return "" }

// containerDriver runs the workload's image with podman (container.go):
// the shim reads its orders from the allocation directory.
type containerDriver struct{ a *Agent }

func (c containerDriver) prepare(d model.DesiredAlloc, dir string, env []string, mig *gpu.MIGInstance) ([]string, error) {
	sp, err := c.a.containerSpec(d, dir, env, mig)
	if err != nil {
		return nil, err
	}
	return nil, writeContainerSpec(dir, sp)
}

func (containerDriver) container(alloc string) string { return containerName(alloc) }
