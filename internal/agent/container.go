package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/model"
	"gopkg.in/yaml.v3"
)

// The container driver runs a workload that names an image with podman:
// daemonless, so a container is a child of the shim like an exec
// workload's process (podman run attached, signals proxied), and it keeps
// running under podman's conmon when the agent dies. The exec driver's
// machinery is reused whole: the shim is the group leader, its pid file
// is what a restarted agent adopts, the logs are the shim's files. What
// a container adds is a name (berth-<alloc>) and labels, so that the
// agent can kill what outlived its podman client and remove what a
// reboot left behind.

// ContainerConfig is how the agent runs images; every field comes from
// the agent's own configuration, never from a job.
type ContainerConfig struct {
	// Podman is the podman binary ("podman" on PATH when empty).
	Podman string
	// Runtime is the OCI runtime podman uses (its --runtime, a full path
	// such as /usr/sbin/runc); podman's default when empty.
	Runtime string
	// Pull is the image pull policy: missing (default), always or never.
	Pull string
	// AuthFile holds registry credentials (podman's --authfile).
	AuthFile string
	// Args are more options for every podman run (ulimits, security
	// options, --init), placed before berth's own.
	Args []string
	// CDIDirs are searched for CDI specs (default /etc/cdi and
	// /var/run/cdi): where one names the node's GPUs, containers get
	// exactly theirs as CDI devices.
	CDIDirs []string
}

func (c *ContainerConfig) defaults() error {
	if c.Podman == "" {
		c.Podman = "podman"
	}
	switch c.Pull {
	case "":
		c.Pull = "missing"
	case "missing", "always", "never":
	default:
		return fmt.Errorf("--image-pull: %q: expected missing, always or never", c.Pull)
	}
	if c.CDIDirs == nil {
		c.CDIDirs = []string{"/etc/cdi", "/var/run/cdi"}
	}
	return nil
}

// containerName is the container an allocation runs in.
func containerName(alloc string) string { return "berth-" + alloc }

// containerFile is the shim's orders for a container, in the allocation
// directory. It holds no environment values: podman takes those from
// the shim's environment by name (-e NAME), off every command line.
const containerFile = ".berth-container.json"

// containerSpec is what the shim does for a container: pull the image
// as the policy says, run it, and once it ends read whether the kernel
// killed it for memory and remove it.
type containerSpec struct {
	Podman   string   `json:"podman"`
	Global   []string `json:"global,omitempty"` // podman's own options (--runtime)
	Name     string   `json:"name"`
	Image    string   `json:"image"`
	Pull     string   `json:"pull"`
	AuthFile string   `json:"authfile,omitempty"`
	Run      []string `json:"run"` // podman run ... -- image command...
	PidFile  string   `json:"pid_file"`
}

// ctrPidFile is where podman writes the container's main process id.
const ctrPidFile = ".berth-container-pid"

// containerSpec builds the podman run for an allocation: exactly its
// GPUs, its CPU and memory, its directories, berth's variables.
func (a *Agent) containerSpec(d model.DesiredAlloc, dir string, env []string, mig *gpu.MIGInstance) (containerSpec, error) {
	c := a.cfg.Container
	abs, err := filepath.Abs(dir)
	if err != nil {
		return containerSpec{}, err
	}
	// Found with the agent's PATH: the shim runs with the job's.
	podman, err := exec.LookPath(c.Podman)
	if err != nil {
		return containerSpec{}, fmt.Errorf("the workload names image %s, and podman (%s) is not on this node: %w", d.Workload.Image, c.Podman, err)
	}
	sp := containerSpec{Podman: podman, Name: containerName(d.ID), Image: d.Workload.Image, Pull: c.Pull, AuthFile: c.AuthFile,
		PidFile: filepath.Join(abs, ctrPidFile)}
	if c.Runtime != "" {
		sp.Global = []string{"--runtime", c.Runtime}
	}
	run := []string{"run", "--name", sp.Name,
		// A launch cut short (the agent died before the pid was written)
		// may have left a container of this name: it is replaced.
		"--replace",
		// The container's main process, for the OOM watch: a file, not
		// a podman inspect every few milliseconds.
		"--pidfile", filepath.Join(abs, ctrPidFile),
		"--label", "berth.alloc=" + d.ID, "--label", "berth.node=" + a.cfg.NodeID, "--label", "berth.state=" + a.state.path,
		// The node's network: NCCL and the readiness check see the
		// workload where they would see an exec workload.
		"--network", "host", "--pull", "never"}
	run = append(run, c.Args...)
	if d.CPUMilli > 0 {
		run = append(run, "--cpus", strconv.FormatFloat(float64(d.CPUMilli)/1000, 'f', 3, 64))
	}
	if d.MemoryMiB > 0 {
		run = append(run, "--memory", strconv.FormatInt(d.MemoryMiB, 10)+"m")
	}
	mounts := [][2]string{{abs, abs}}
	if d.CheckpointDir != "" {
		host, err := a.mountable(d.CheckpointDir)
		if err != nil {
			return sp, err
		}
		mounts = append(mounts, [2]string{host, filepath.Clean(d.CheckpointDir)})
	}
	if d.GPUMilli > 0 && mig == nil {
		// A share runs under MPS: the control daemon's pipes, and its
		// shared memory, are the host's.
		if st, err := os.Stat(mpsPipeDir); err == nil && st.IsDir() {
			mounts = append(mounts, [2]string{mpsPipeDir, mpsPipeDir})
		}
		run = append(run, "--ipc", "host")
	}
	for _, m := range mounts {
		run = append(run, "--volume", m[0]+":"+m[1]+":rw")
	}
	devs, err := a.cdiDevices(d.GPUs, mig)
	if err != nil {
		return sp, err
	}
	for _, dev := range devs {
		run = append(run, "--device", dev)
	}
	seen := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		// The agent's own PATH, HOME, ... are not the image's; the job's
		// (its env may set them) are.
		_, mine := d.Workload.Env[k]
		if !seen[k] && (mine || !slices.Contains(passEnv, k)) {
			seen[k] = true
			run = append(run, "--env", k) // the value from podman's environment
		}
	}
	run = append(run, "--", d.Workload.Image)
	sp.Run = append(run, d.Workload.Command...)
	return sp, nil
}

// mountable checks a job's checkpoint directory before it is bound into
// the job's container, read-write, and returns the host directory to
// bind (symlinks resolved). The path is the job's to choose, and a
// container runs as root unless the image says otherwise: the root, a
// system tree or the agent's own state (other allocations' records,
// environments included) would hand it the node. An exec workload runs
// as the agent's user and could write there anyway; a container is what
// a platform expects to be fenced in.
func (a *Agent) mountable(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("checkpoint directory %q: must be an absolute path to be mounted into a container", p)
	}
	state, err := filepath.EvalSymlinks(a.state.path)
	if err != nil {
		return "", err
	}
	check := func(q string) error {
		if q == "/" {
			return fmt.Errorf("checkpoint directory %s: not mounted into a container: it is the root", p)
		}
		if within(q, state) || within(state, q) {
			return fmt.Errorf("checkpoint directory %s: not mounted into a container: it is or holds the agent's state directory %s", p, state)
		}
		for _, sys := range systemDirs {
			if within(q, sys) {
				return fmt.Errorf("checkpoint directory %s: not mounted into a container: %s is a system directory", p, sys)
			}
		}
		return nil
	}
	// The path as given first, so that a refused one is not created.
	if err := check(filepath.Clean(p)); err != nil {
		return "", err
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint directory for the container: %w", err)
	}
	host, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("checkpoint directory %s: %w", p, err)
	}
	return host, check(host)
}

// systemDirs are never bound into a container.
var systemDirs = []string{"/proc", "/sys", "/dev", "/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
	"/run", "/var/run", "/var/lib/containers", "/var/lib/kubelet", "/root"}

// within says whether p is dir or inside it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// mpsPipeDir is where the MPS control daemon listens by default.
const mpsPipeDir = "/tmp/nvidia-mps"

// cdiDevices names the allocation's GPUs (or its MIG instance) as CDI
// devices, when a CDI spec on this node lists them: the NVIDIA Container
// Toolkit writes one (nvidia-ctk cdi generate). Names by UUID are taken
// first (stable when GPUs renumber), then by index (<gpu>, or
// <gpu>:<instance> for MIG). Without a spec the
// container gets only NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES (the
// fake backend; a runtime hook that reads them). With a spec that lacks
// one of the GPUs, the start fails: running on the wrong GPUs, or on
// none, would be worse.
func (a *Agent) cdiDevices(m model.GPUMask, mig *gpu.MIGInstance) ([]string, error) {
	names := cdiNames(a.cfg.Container.CDIDirs)
	if len(names) == 0 {
		return nil, nil
	}
	pick := func(cands ...string) (string, bool) {
		for _, c := range cands {
			if c != "" && names[c] {
				return cdiKind + "=" + c, true
			}
		}
		return "", false
	}
	if mig != nil {
		// By index, a MIG device is <gpu>:<its index on that GPU>.
		byIndex := ""
		if g := gpuIndex(m); g < len(a.inv.Devices) {
			for i, mi := range a.inv.Devices[g].MIG {
				if mi.UUID == mig.UUID {
					byIndex = fmt.Sprintf("%d:%d", g, i)
				}
			}
		}
		if dev, ok := pick(mig.UUID, byIndex); ok {
			return []string{dev}, nil
		}
		return nil, fmt.Errorf("the CDI spec names no device %s (MIG instance %s): regenerate it (nvidia-ctk cdi generate)", mig.UUID, mig.Profile())
	}
	var out []string
	for i := range model.MaxGPUsPerNode {
		if m&(1<<uint(i)) == 0 {
			continue
		}
		uuid := ""
		if i < len(a.inv.Devices) {
			uuid = a.inv.Devices[i].UUID
		}
		dev, ok := pick(uuid, strconv.Itoa(i))
		if !ok {
			return nil, fmt.Errorf("the CDI spec names no device for GPU %d (%s): regenerate it (nvidia-ctk cdi generate)", i, uuid)
		}
		out = append(out, dev)
	}
	return out, nil
}

const cdiKind = "nvidia.com/gpu"

// cdiNames are the device names the CDI specs in dirs give kind
// nvidia.com/gpu. A spec is JSON or YAML; JSON is YAML, so one parser
// reads both.
func cdiNames(dirs []string) map[string]bool {
	names := map[string]bool{}
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			ext := filepath.Ext(e.Name())
			if e.IsDir() || ext != ".yaml" && ext != ".yml" && ext != ".json" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				continue
			}
			var spec struct {
				Kind    string `yaml:"kind"`
				Devices []struct {
					Name string `yaml:"name"`
				} `yaml:"devices"`
			}
			if yaml.Unmarshal(b, &spec) != nil || spec.Kind != cdiKind {
				continue
			}
			for _, dev := range spec.Devices {
				names[dev.Name] = true
			}
		}
	}
	return names
}

// removeContainer stops and removes an allocation's container, giving
// it grace between SIGTERM and SIGKILL; one that is not there is no
// error. It is bounded: podman that hangs must not hold the agent.
func (c ContainerConfig) removeContainer(name string, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), grace+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Podman, c.global([]string{"rm", "--force", "--ignore", "--time", strconv.Itoa(int(grace.Seconds())), name})...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("podman rm %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

func (c ContainerConfig) global(args []string) []string {
	if c.Runtime != "" {
		return append([]string{"--runtime", c.Runtime}, args...)
	}
	return args
}

// leftoverContainers are the containers this state directory's agents
// started (its label) that no allocation adopted now runs: a reboot's,
// or an allocation whose shim died. They are removed before the first
// heartbeat, like leftover processes.
func (a *Agent) removeLeftoverContainers(running map[string]bool) {
	c := a.cfg.Container
	if _, err := exec.LookPath(c.Podman); err != nil {
		return // no podman on this node: no containers either
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Podman, c.global([]string{"ps", "--all", "--filter", "label=berth.state=" + a.state.path,
		"--format", "{{.Names}}"})...).Output()
	if err != nil {
		a.log.Warn("cannot list leftover containers", "err", err)
		return
	}
	for _, name := range strings.Fields(string(out)) {
		if running[name] {
			continue
		}
		a.log.Warn("removing a container no running allocation owns", "container", name)
		if err := c.removeContainer(name, a.cfg.OrphanGrace); err != nil {
			a.log.Error("leftover container not removed", "err", err)
		}
	}
}

// runContainer is the shim for an image: pull as the policy says, run
// attached (podman proxies the signals a stop sends to the group), then
// read whether it was killed for memory and remove it. A pull that fails
// ends the allocation with 125, podman's own code for its errors, and
// the reason in the status and in stderr: the image name and what the
// registry said, once, not a retry loop.
func runContainer(sp containerSpec) shimStatus {
	podman := func(args ...string) *exec.Cmd {
		return exec.Command(sp.Podman, append(append([]string(nil), sp.Global...), args...)...)
	}
	fail := func(format string, args ...any) shimStatus {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintf(os.Stderr, "[berth agent] %s\n", msg)
		return shimStatus{ExitCode: 125, Error: msg}
	}
	have := podman("image", "exists", sp.Image).Run() == nil
	switch {
	case sp.Pull == "never" && !have:
		return fail("image %s is not on this node and the agent's pull policy is never", sp.Image)
	case sp.Pull == "always" || !have:
		args := []string{"pull", "--quiet"}
		if sp.AuthFile != "" {
			args = append(args, "--authfile", sp.AuthFile)
		}
		// In the job's log: a large image takes minutes, and the job is
		// running as far as the scheduler knows.
		fmt.Fprintf(os.Stderr, "[berth agent] pulling image %s\n", sp.Image)
		t0 := time.Now()
		out, err := podman(append(args, "--", sp.Image)...).CombinedOutput()
		if err != nil {
			return fail("pulling image %s failed: %s", sp.Image, lastLine(out, err))
		}
		fmt.Fprintf(os.Stderr, "[berth agent] pulled image %s in %s\n", sp.Image, time.Since(t0).Round(100*time.Millisecond))
	}
	cmd := podman(sp.Run...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fail("starting %s: %v", sp.Podman, err)
	}
	exited := make(chan struct{})
	oomSeen := make(chan bool, 1)
	_ = os.Remove(sp.PidFile)
	go func() { oomSeen <- watchOOM(sp.PidFile, exited) }()
	_ = cmd.Wait()
	close(exited)
	st := shimStatus{ExitCode: exitCode(cmd.ProcessState), OOMKilled: <-oomSeen}
	if out, err := podman("inspect", "--format", "{{.State.OOMKilled}}", sp.Name).Output(); err == nil && strings.TrimSpace(string(out)) == "true" {
		st.OOMKilled = true
	}
	if st.OOMKilled {
		fmt.Fprintf(os.Stderr, "[berth agent] the container was killed for memory: it used more than its limit\n")
	}
	st.Removed = podman("rm", "--force", "--ignore", "--time", "0", sp.Name).Run() == nil
	return st
}

// lastLine is the last non-empty line of a command's output, or its error.
func lastLine(out []byte, err error) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}

func writeContainerSpec(dir string, sp containerSpec) error {
	return writePrivateJSON(filepath.Join(dir, containerFile), sp)
}

func readContainerSpec(dir string) (containerSpec, bool) {
	var sp containerSpec
	b, err := os.ReadFile(filepath.Join(dir, containerFile))
	if err != nil || json.Unmarshal(b, &sp) != nil {
		return sp, false
	}
	return sp, true
}

// watchOOM reports whether the kernel's OOM killer struck inside the
// container, from its memory cgroup's counter (memory.events on cgroup
// v2, memory.oom_control on v1), read every 20 ms until exited closes.
// Podman's own State.OOMKilled is not set everywhere (cgroup v1 with
// runc): the counter is the kernel's word. The cgroup goes with the
// container, so it is read while the container runs.
func watchOOM(pidFile string, exited <-chan struct{}) bool {
	var files []string
	for len(files) == 0 {
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
		b, _ := os.ReadFile(pidFile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			files = memoryCounters(pid)
		}
	}
	for {
		for _, f := range files {
			if oomKills(f) > 0 {
				return true
			}
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// memoryCounters are the files that count OOM kills in pid's memory
// cgroup.
func memoryCounters(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			out = append(out, filepath.Join("/sys/fs/cgroup", parts[2], "memory.events"))
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			out = append(out, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.oom_control"))
		}
	}
	return out
}

// oomKills reads the oom_kill line of a memory.events or
// memory.oom_control file; 0 when there is none.
func oomKills(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
