package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// stopLeftovers ends the processes an earlier incarnation of this agent
// started. Their allocations belong to the old epoch, which the control
// plane invalidates when it hears the new one, and it may place new work
// on those GPUs at once: so they must be gone before the first heartbeat.
// They get SIGTERM (a chance to checkpoint) and SIGKILL after OrphanGrace.
func (a *Agent) stopLeftovers() {
	dirs, _ := filepath.Glob(filepath.Join(a.state.path, "allocs", "*", "pid"))
	var groups []int
	for _, pidFile := range dirs {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			continue
		}
		var pid int
		var start uint64
		if _, err := fmt.Sscan(string(b), &pid, &start); err != nil {
			continue
		}
		// Same pid and start time: the same process, not a reused pid.
		if st, err := readStat(pid); err == nil && st.start == start && st.pgrp == pid {
			groups = append(groups, pid)
			a.log.Warn("stopping a process left by an earlier incarnation", "alloc", filepath.Base(filepath.Dir(pidFile)), "pid", pid)
			_ = signalGroup(pid, syscall.SIGTERM)
		}
		_ = os.Remove(pidFile)
	}
	if len(groups) == 0 {
		return
	}
	deadline := time.Now().Add(a.cfg.OrphanGrace)
	for _, g := range groups {
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
