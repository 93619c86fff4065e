package agent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cgroup2Magic is CGROUP2_SUPER_MAGIC from linux/magic.h.
const cgroup2Magic = 0x63677270

// cgroups puts each allocation in its own cgroup v2 child with cpu.max
// and memory.max from the allocation. It needs a delegated subtree (the
// agent's own cgroup, writable by it: systemd's Delegate=yes); where the
// host has none the agent runs without limits and says why once.
//
// Layout, as runc and systemd lay out delegated trees (cgroup v2 allows
// processes only in leaves once controllers are enabled):
//
//	<root>/agent          the agent itself
//	<root>/allocs/<id>    one leaf per allocation
type cgroups struct {
	root string
}

// setupCgroups prepares root (the agent's own cgroup when empty). The
// error says why limits are unavailable.
func setupCgroups(root string) (*cgroups, error) {
	if root == "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil || st.Type != cgroup2Magic {
			return nil, errors.New("cgroup v2 is not mounted at /sys/fs/cgroup (cgroup v1 or hybrid host)")
		}
		own, err := ownCgroup()
		if err != nil {
			return nil, err
		}
		root = filepath.Join("/sys/fs/cgroup", own)
	}
	c := &cgroups{root: root}
	if err := c.setup(); err != nil {
		return nil, fmt.Errorf("cgroup %s is not delegated to the agent (%v): run it under systemd with Delegate=yes", root, err)
	}
	return c, nil
}

func (c *cgroups) setup() error {
	agent := filepath.Join(c.root, "agent")
	if err := os.MkdirAll(agent, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(agent, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if err := enable(c.root); err != nil {
		return err
	}
	allocs := filepath.Join(c.root, "allocs")
	if err := os.MkdirAll(allocs, 0o755); err != nil {
		return err
	}
	return enable(allocs)
}

// enable turns on the cpu and memory controllers for dir's children.
func enable(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644)
}

// create makes an allocation's cgroup and returns it with an open
// directory fd for SysProcAttr.CgroupFD (the process starts inside it,
// with no window where it runs unlimited).
func (c *cgroups) create(id string, cpuMilli, memMiB int64) (string, *os.File, error) {
	dir := filepath.Join(c.root, "allocs", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	if cpuMilli > 0 {
		// cpu.max is "<quota> <period>" in microseconds.
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d 100000", cpuMilli*100), 0o644); err != nil {
			return "", nil, err
		}
	}
	if memMiB > 0 {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), strconv.AppendInt(nil, memMiB<<20, 10), 0o644); err != nil {
			return "", nil, err
		}
	}
	fd, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	return dir, fd, nil
}

// populated reports whether any process is left in an allocation's cgroup.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), "populated 1")
}

// kill ends everything in an allocation's cgroup (cgroup.kill, Linux 5.14+).
func killCgroup(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644)
}

// ownCgroup is the agent's cgroup v2 path from /proc/self/cgroup.
func ownCgroup() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
}
