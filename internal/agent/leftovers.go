package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// stopLeftovers ends processes that belong to no allocation this agent
// knows: after a new epoch (a reboot, or a wiped state directory) every
// process of an earlier one, and in any case a process whose environment
// places it in this state directory but that adopt did not take (its
// record is gone or unreadable). Their allocations are invalidated by
// the control plane, which may place new work on those GPUs at once, so
// they must be gone before the first heartbeat. They get SIGTERM (a
// chance to checkpoint) and SIGKILL after OrphanGrace. kept are the
// process groups adopt took over.
func (a *Agent) stopLeftovers(fresh bool, kept map[int]bool) {
	groups := map[int]bool{}
	if fresh {
		for _, dir := range a.state.allocDirs() {
			pid, start, ok := readPid(dir)
			// Same pid and start time: the same process, not a reused pid.
			if st, err := readStat(pid); ok && err == nil && st.start == start && st.pgrp == pid {
				groups[pid] = true
			}
		}
	}
	for _, g := range a.strangers() {
		groups[g] = true
	}
	for g := range kept {
		delete(groups, g)
	}
	if len(groups) == 0 {
		return
	}
	for g := range groups {
		a.log.Warn("stopping a process group no allocation of this incarnation owns", "pgid", g)
		_ = signalGroup(g, syscall.SIGTERM)
	}
	deadline := time.Now().Add(a.cfg.OrphanGrace)
	for g := range groups {
		for groupAlive(g) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if groupAlive(g) {
			_ = signalGroup(g, syscall.SIGKILL)
			for limit := time.Now().Add(30 * time.Second); groupAlive(g) && time.Now().Before(limit); {
				time.Sleep(20 * time.Millisecond)
			}
			if groupAlive(g) {
				a.log.Error("a leftover process group survives SIGKILL (stuck in the kernel?)", "pgid", g)
			}
		}
	}
	a.log.Info("processes from earlier incarnations gone", "groups", len(groups))
}

// strangers are the process groups of processes whose environment says
// they run an allocation in this state directory (BERTH_ALLOC_DIR). It
// finds what a wiped or damaged state directory no longer lists; it can
// read the environment of the agent's own user's processes (all of them
// for root), which is who runs workloads.
func (a *Agent) strangers() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	root, err := filepath.Abs(filepath.Join(a.state.path, "allocs"))
	if err != nil {
		return nil
	}
	want := []byte("BERTH_ALLOC_DIR=" + root + string(filepath.Separator))
	self, own := os.Getpid(), syscall.Getpgrp()
	seen := map[int]bool{}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		dir, ok := envValue(env, want)
		if !ok {
			continue
		}
		if p := a.allocs[filepath.Base(dir)]; p != nil && !p.exited() {
			// An adopted allocation's: a container's processes and its
			// conmon are in groups of their own, not the shim's.
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.state == 'Z' || seen[st.pgrp] || st.pgrp <= 1 || st.pgrp == own {
			continue
		}
		seen[st.pgrp] = true
		out = append(out, st.pgrp)
	}
	return out
}

// envValue finds, in a NUL-separated environment, the variable that
// starts with prefix (NAME=...) and returns the rest of its value.
func envValue(env, prefix []byte) (string, bool) {
	for len(env) > 0 {
		kv := env
		if i := bytes.IndexByte(env, 0); i >= 0 {
			kv, env = env[:i], env[i+1:]
		} else {
			env = nil
		}
		if bytes.HasPrefix(kv, prefix) {
			return string(kv[len(prefix):]), true
		}
	}
	return "", false
}
