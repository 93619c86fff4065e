package agent

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStat is the part of /proc/<pid>/stat the agent needs.
type procStat struct {
	pid, ppid, pgrp int
	state           byte
	start           uint64 // clock ticks after boot: with pid, a process identity
}

// readStat parses /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procStat{}, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return procStat{}, errors.New("short stat")
	}
	st := procStat{pid: pid, state: f[0][0]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgrp, _ = strconv.Atoi(f[2])
	st.start, _ = strconv.ParseUint(f[19], 10, 64)
	return st, nil
}

// groupAlive reports whether any process of the group still runs. Zombies
// do not count (they hold no GPU memory); those that are the agent's own
// children are reaped on the way.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: assume the worst
	}
	self := os.Getpid()
	alive := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.pgrp != pgid {
			continue
		}
		if st.state == 'Z' || st.state == 'X' {
			if st.ppid == self && pid != pgid {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			}
			continue
		}
		alive = true
	}
	return alive
}

// signalGroup sends sig to every process of the group.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
