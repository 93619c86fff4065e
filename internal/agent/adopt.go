package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/model"
)

// allocRecord is what an agent restarted in the same boot needs to take
// an allocation over: its orders as they were at launch, and what the
// launch chose (MIG instance, cgroup). It holds the workload's env, so it
// is readable by the agent's user only.
type allocRecord struct {
	Desired   model.DesiredAlloc `json:"desired"`
	MIG       string             `json:"mig,omitempty"`
	CgroupDir string             `json:"cgroup_dir,omitempty"`
}

const (
	recordFile = ".berth-alloc.json"
	// releasedFile marks an allocation whose exit the control plane has
	// taken: a restarted agent does not report it again.
	releasedFile = ".berth-released"
)

func writeRecord(dir string, r allocRecord) error {
	return writePrivateJSON(filepath.Join(dir, recordFile), r)
}

// writePrivateJSON writes v as JSON, whole, readable by the agent's user
// only: what it writes for adoption holds the workload's orders.
func writePrivateJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileMode(path, b, 0o600)
}

func readRecord(dir string) (allocRecord, error) {
	var r allocRecord
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", recordFile, err)
	}
	return r, nil
}

func readExit(dir string) (model.ActualAlloc, bool) {
	var e model.ActualAlloc
	b, err := os.ReadFile(filepath.Join(dir, "exit"))
	if err != nil || json.Unmarshal(b, &e) != nil {
		return e, false
	}
	return e, true
}

func readPid(dir string) (pid int, start uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, 0, false
	}
	if _, err := fmt.Sscan(string(b), &pid, &start); err != nil || pid <= 0 {
		return 0, 0, false
	}
	return pid, start, true
}

func released(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, releasedFile))
	return err == nil
}

func markReleased(dir string) { _ = os.WriteFile(filepath.Join(dir, releasedFile), nil, 0o644) }

// allocDirs is every allocation directory not yet released.
func (s *stateDir) allocDirs() []string {
	ents, _ := os.ReadDir(filepath.Join(s.path, "allocs"))
	var out []string
	for _, e := range ents {
		if d := filepath.Join(s.path, "allocs", e.Name()); e.IsDir() && !released(d) {
			out = append(out, d)
		}
	}
	return out
}

// adopt takes over what an earlier agent of this same boot and epoch
// left: allocations still running are supervised again (through their
// shim's status file, since they are no longer this process's children),
// ones that ended meanwhile are reported with the exit their shim
// recorded, and holds go on holding. It returns the process groups it
// took, which must not be stopped as strangers. An allocation whose
// launch was cut short before its pid was written is left out: the
// orders still list it and it starts again.
func (a *Agent) adopt() map[int]bool {
	kept := map[int]bool{}
	for _, dir := range a.state.allocDirs() {
		id := filepath.Base(dir)
		rec, err := readRecord(dir)
		if err != nil {
			continue // not one this agent can take over: stopped as a stranger
		}
		p := newAlloc(id, dir, rec.Desired.GPUs, a.log, a.poke)
		p.milli, p.mig, p.cgDir, p.logMax = rec.Desired.GPUMilli, rec.MIG, rec.CgroupDir, a.cfg.LogMaxBytes
		if sp, ok := readContainerSpec(dir); ok {
			p.ctr, p.ctrCfg = sp.Name, a.cfg.Container
		}
		if e, ok := readExit(dir); ok {
			p.state, p.exitCode, p.killed, p.checkpoint, p.agentStop = model.ActualExited, e.ExitCode, e.Killed, e.Checkpoint, e.AgentStop
			close(p.done)
			a.allocs[id] = p
			continue
		}
		if !runs(rec.Desired.Workload) {
			p.hold, p.state = true, model.ActualRunning
			a.allocs[id] = p
			continue
		}
		pid, start, ok := readPid(dir)
		if !ok {
			continue
		}
		p.state = model.ActualRunning
		leader := make(chan int, 1)
		st, err := readStat(pid)
		switch {
		case err == nil && st.start == start && st.pgrp == pid && st.state != 'Z':
			p.pgid = pid
			kept[pid] = true
			go watchLeader(pid, start, dir, leader)
			a.log.Info("adopted an allocation still running", "alloc", id, "pid", pid)
		case err == nil:
			// The pid is another process's now: the workload ended long
			// ago, and that group is not ours to touch.
			p.mu.Lock()
			p.finishLocked(shimExit(dir))
			p.mu.Unlock()
			a.allocs[id] = p
			continue
		default:
			// The leader ended while no agent watched. A pid still used
			// as a group id is not handed out again, so what is left in
			// the group is the workload's own.
			p.pgid = pid
			kept[pid] = true
			leader <- shimExit(dir)
			a.log.Info("allocation ended while the agent was away", "alloc", id)
		}
		go p.supervise(leader, a.cfg.StrayGrace)
		if r := rec.Desired.Workload.Readiness; r != nil && rec.Desired.OwnerKind == model.OwnerInference {
			p.readiness = r
			go p.watchReady(r, a.allocEnv(rec.Desired, dir, a.migByUUID(rec.MIG)))
		}
		a.allocs[id] = p
	}
	return kept
}

// shimExit is the exit code the shim recorded, -1 when it recorded none
// (it was killed too).
func shimExit(dir string) int {
	if st, ok := readShimStatus(dir); ok {
		return st.ExitCode
	}
	return -1
}

// watchLeader waits for an adopted group's leader (the shim) to end and
// delivers the exit code it recorded.
func watchLeader(pid int, start uint64, dir string, out chan<- int) {
	for {
		st, err := readStat(pid)
		if err != nil || st.start != start || st.state == 'Z' || st.state == 'X' {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	out <- shimExit(dir)
}

// previous is, after a new epoch, the last checkpoint of each allocation
// the earlier epoch left (read once its processes are gone), so the
// control plane requeues them from there. Every directory is released:
// the new epoch reports none of them again.
func (a *Agent) previous() []model.ActualAlloc {
	var out []model.ActualAlloc
	for _, dir := range a.state.allocDirs() {
		ck := readCheckpoint(dir)
		if e, ok := readExit(dir); ok && e.Checkpoint != "" {
			ck = e.Checkpoint
		}
		if ck != "" {
			out = append(out, model.ActualAlloc{ID: filepath.Base(dir), State: model.ActualExited, Checkpoint: ck})
		}
		markReleased(dir)
	}
	return out
}

func (a *Agent) migByUUID(uuid string) *gpu.MIGInstance {
	if uuid == "" {
		return nil
	}
	for _, d := range a.inv.Devices {
		for i := range d.MIG {
			if d.MIG[i].UUID == uuid {
				return &d.MIG[i]
			}
		}
	}
	return nil
}
