package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/model"
)

// passEnv are the agent's own variables a workload inherits. Nothing else
// is passed: the agent's token in particular must not reach a job.
var passEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// launch starts an allocation. A start that fails is an allocation that
// exited (127 when the command is missing, 126 otherwise), so the control
// plane learns of it in the next heartbeat. The workload runs under the
// shim (shim.go) with its logs as files it holds, and what an agent
// restarted in the same boot needs to adopt it is written first
// (.berth-alloc.json, then pid).
func (a *Agent) launch(d model.DesiredAlloc) *alloc {
	dir := a.state.allocDir(d.ID)
	p := newAlloc(d.ID, dir, d.GPUs, a.log, a.poke)
	p.milli, p.logMax = d.GPUMilli, a.cfg.LogMaxBytes
	mig, migErr := a.migFor(d)
	if mig != nil {
		p.mig = mig.UUID
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		a.log.Error("cannot create allocation directory", "alloc", d.ID, "err", err)
		p.finishLocked(126)
		return p
	}
	if migErr != nil {
		return a.failStart(p, 126, migErr)
	}
	rec := allocRecord{Desired: d, MIG: p.mig}
	if !runs(d.Workload) {
		// Nothing to run: the allocation holds its GPUs until stopped
		// (an interactive reservation, or load-test jobs).
		p.hold, p.state = true, model.ActualRunning
		if err := writeRecord(dir, rec); err != nil {
			return a.failStart(p, 126, err)
		}
		return p
	}
	stdout, err := openLog(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return a.failStart(p, 126, err)
	}
	defer stdout.Close()
	stderr, err := openLog(filepath.Join(dir, "stderr.log"))
	if err != nil {
		return a.failStart(p, 126, err)
	}
	defer stderr.Close()
	_ = os.Remove(filepath.Join(dir, statusFile))
	if d.JobGPUs > 0 {
		if err := writeSize(dir, d.JobGPUs); err != nil {
			return a.failStart(p, 126, err)
		}
	}
	shim, err := a.shimPath()
	if err != nil {
		return a.failStart(p, 126, err)
	}
	env := a.allocEnv(d, dir, mig)
	drv := a.driverFor(d.Workload)
	args, err := drv.prepare(d, dir, env, mig)
	if err != nil && !os.IsNotExist(err) {
		return a.failStart(p, 126, err)
	}
	if p.ctr = drv.container(d.ID); p.ctr != "" {
		p.ctrCfg = a.cfg.Container
	}
	cmd := exec.Command(shim, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), env...), shimEnv+"="+dir)
	cmd.Stdout, cmd.Stderr = stdout, stderr // *os.File: the descriptors themselves, no pipe
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if a.cg != nil && p.ctr == "" {
		cgDir, fd, err := a.cg.create(d.ID, d.CPUMilli, d.MemoryMiB)
		if err != nil {
			a.log.Warn("allocation runs without cgroup limits", "alloc", d.ID, "err", err)
		} else {
			defer fd.Close()
			p.cgDir, rec.CgroupDir = cgDir, cgDir
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(fd.Fd())
		}
	}
	if err := writeRecord(dir, rec); err != nil {
		return a.failStart(p, 126, err)
	}
	if err := cmd.Start(); err != nil {
		return a.failStart(p, 126, err)
	}
	pid := cmd.Process.Pid
	p.pgid, p.state = pid, model.ActualRunning
	if st, err := readStat(pid); err == nil {
		_ = writeFileSync(filepath.Join(dir, "pid"), fmt.Appendf(nil, "%d %d\n", pid, st.start))
	}
	a.log.Info("allocation started", "alloc", d.ID, "owner", d.OwnerID, "gpus", d.GPUs.String(), "pid", pid, "container", p.ctr)
	leader := make(chan int, 1)
	go func() {
		_ = cmd.Wait()
		leader <- exitCode(cmd.ProcessState)
	}()
	go p.supervise(leader, a.cfg.StrayGrace)
	if r := d.Workload.Readiness; r != nil && d.OwnerKind == model.OwnerInference {
		p.readiness = r
		go p.watchReady(r, env)
	}
	return p
}

// runs says whether a workload has something to run: a command, or an
// image (whose own entrypoint runs when it names no command).
func runs(w *model.Workload) bool {
	return w != nil && (len(w.Command) > 0 || w.Image != "")
}

// shimPath is the binary the shim runs from: the agent's own.
func (a *Agent) shimPath() (string, error) {
	if a.cfg.Shim != "" {
		return a.cfg.Shim, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("the agent's own binary runs each workload's shim, and its path is unknown: %w", err)
	}
	return exe, nil
}

func (a *Agent) failStart(p *alloc, code int, err error) *alloc {
	a.log.Error("allocation failed to start", "alloc", p.id, "err", err)
	p.note("failed to start: %v", err)
	p.mu.Lock()
	p.startErr = err.Error()
	p.finishLocked(code)
	p.mu.Unlock()
	return p
}

// allocEnv is a workload's environment: a few of the agent's variables,
// the workload's own, then berth's, which win. mig is the MIG instance a
// share runs on, nil for none.
func (a *Agent) allocEnv(d model.DesiredAlloc, dir string, mig *gpu.MIGInstance) []string {
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(d.Workload.Env))
	for k := range d.Workload.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+d.Workload.Env[k])
	}
	visible := strings.Join(a.visible(d.GPUs), ",")
	if mig != nil {
		visible = mig.UUID
	}
	env = append(env,
		"CUDA_VISIBLE_DEVICES="+visible,
		"NVIDIA_VISIBLE_DEVICES="+visible,
		"BERTH_NODE_ID="+a.cfg.NodeID,
		"BERTH_ALLOC_ID="+d.ID,
		"BERTH_ALLOC_DIR="+dir,
		// Where the workload reports the checkpoint it wrote (bytes and
		// seconds): the measure of checkpoint bandwidth (R3).
		"BERTH_CHECKPOINT_STATS="+filepath.Join(dir, statsFile),
		"BERTH_GPUS="+strconv.Itoa(d.GPUs.Count()),
	)
	if d.OwnerKind == model.OwnerInference {
		env = append(env, "BERTH_DEPLOYMENT="+d.OwnerID, "BERTH_REPLICA="+strconv.Itoa(d.Replica))
	} else {
		env = append(env, "BERTH_JOB_ID="+d.OwnerID)
	}
	if mig != nil {
		// A share on a MIG-partitioned GPU runs on its own instance: the
		// hardware partition is the limit, MPS has nothing to add.
		env = append(env, "BERTH_GPU_MILLI="+strconv.Itoa(d.GPUMilli), "BERTH_MIG_INSTANCE="+mig.Profile())
	} else if d.GPUMilli > 0 {
		// A share of one GPU runs under MPS: the share is the percentage of
		// the GPU's SMs it may use, and its part of the GPU's memory the
		// most it may pin.
		env = append(env, "BERTH_GPU_MILLI="+strconv.Itoa(d.GPUMilli),
			"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(max(1, (d.GPUMilli+9)/10)))
		if g := gpuIndex(d.GPUs); g < len(a.inv.Devices) && a.inv.Devices[g].MemoryMiB > 0 {
			env = append(env, fmt.Sprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%dM", a.inv.Devices[g].MemoryMiB*int64(d.GPUMilli)/1000))
		}
	}
	if d.CheckpointDir != "" {
		env = append(env, "BERTH_CHECKPOINT_DIR="+d.CheckpointDir)
	}
	if d.Restore != "" {
		env = append(env, "BERTH_RESTORE="+d.Restore)
	}
	if d.JobGPUs > 0 {
		// An elastic job: the size the whole job runs at, and the file
		// that holds it when it changes (SIGUSR1 says it did).
		env = append(env, "BERTH_JOB_GPUS="+strconv.Itoa(d.JobGPUs), "BERTH_SIZE_FILE="+filepath.Join(dir, sizeFile))
	}
	return env
}

// visible names the allocation's GPUs for CUDA: UUIDs from real hardware
// (stable across reordering), indices from the fake backend. A whole GPU
// in MIG mode is named by its instances, the only thing CUDA runs on
// there.
func (a *Agent) visible(m model.GPUMask) []string {
	var out []string
	for i := range model.MaxGPUsPerNode {
		if m&(1<<uint(i)) == 0 {
			continue
		}
		if i < len(a.inv.Devices) && len(a.inv.Devices[i].MIG) > 0 {
			for _, mi := range a.inv.Devices[i].MIG {
				out = append(out, mi.UUID)
			}
			continue
		}
		if a.backend.Name() != "fake" && i < len(a.inv.Devices) && a.inv.Devices[i].UUID != "" {
			out = append(out, a.inv.Devices[i].UUID)
		} else {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out
}

// errMIGBusy: every MIG instance that could hold the share is held by
// another share still running; the share starts when one is free.
var errMIGBusy = errors.New("every MIG instance large enough is in use")

// migFor picks the MIG instance a share runs on: the one its allocation
// names (the scheduler chose it from the layout this agent reported), or,
// when it names none, the smallest free one that holds it. Nil for whole
// GPUs and for GPUs without MIG. A share no instance can hold (the GPU
// repartitioned since) fails to start with the layout in its error.
func (a *Agent) migFor(d model.DesiredAlloc) (*gpu.MIGInstance, error) {
	g := gpuIndex(d.GPUs)
	if d.GPUMilli == 0 || g >= len(a.inv.Devices) || len(a.inv.Devices[g].MIG) == 0 {
		return nil, nil
	}
	held := map[string]bool{}
	for _, p := range a.allocs {
		if p.mig != "" && !p.exited() {
			held[p.mig] = true
		}
	}
	insts := a.inv.Devices[g].MIG
	var best *gpu.MIGInstance
	var layout []string
	fits := false
	for i, mi := range insts {
		layout = append(layout, mi.Profile())
		if mi.Milli() < d.GPUMilli || d.MIGInstance > 0 && i != d.MIGInstance-1 {
			continue
		}
		fits = true
		if !held[mi.UUID] && (best == nil || mi.Milli() < best.Milli()) {
			best = &insts[i]
		}
	}
	switch {
	case best != nil:
		return best, nil
	case fits:
		return nil, errMIGBusy
	case d.MIGInstance > 0:
		return nil, fmt.Errorf("GPU %d is MIG-partitioned (%s): it has no instance %d that holds %dm (repartitioned?)",
			g, strings.Join(layout, " "), d.MIGInstance, d.GPUMilli)
	}
	return nil, fmt.Errorf("GPU %d is MIG-partitioned (%s) and no instance holds %dm: repartition it or ask for at most %dm",
		g, strings.Join(layout, " "), d.GPUMilli, largestMIG(insts))
}

func largestMIG(ms []gpu.MIGInstance) int {
	most := 0
	for _, m := range ms {
		most = max(most, m.Milli())
	}
	return most
}

// gpuIndex is the lowest GPU in a mask.
func gpuIndex(m model.GPUMask) int {
	for i := range model.MaxGPUsPerNode {
		if m&(1<<uint(i)) != 0 {
			return i
		}
	}
	return model.MaxGPUsPerNode
}
