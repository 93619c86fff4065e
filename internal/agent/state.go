package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// stateDir is the agent's directory: a lock so only one agent uses it,
// the boot epoch counter, and one directory per allocation.
type stateDir struct {
	path string
	lock *os.File
}

// openState locks dir (creating it) for this agent.
func openState(dir string) (*stateDir, error) {
	if dir == "" {
		return nil, errors.New("--state-dir: required: a directory the agent keeps across restarts")
	}
	if err := os.MkdirAll(filepath.Join(dir, "allocs"), 0o755); err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("--state-dir: %s is in use by another agent (%v): each agent needs its own", dir, err)
	}
	return &stateDir{path: dir, lock: f}, nil
}

func (s *stateDir) close() error { return s.lock.Close() }

// nextEpoch reads the epoch counter, adds one and persists it before
// returning, so an epoch is never handed out twice even across crashes.
func (s *stateDir) nextEpoch() (uint64, error) {
	p := filepath.Join(s.path, "epoch")
	var cur uint64
	b, err := os.ReadFile(p)
	switch {
	case err == nil:
		cur, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s is corrupt (%q): it holds the boot epoch; restore it or remove it along with this node's state", p, b)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, err
	}
	next := cur + 1
	if err := writeFileSync(p, []byte(strconv.FormatUint(next, 10)+"\n")); err != nil {
		return 0, fmt.Errorf("persist boot epoch: %w", err)
	}
	return next, nil
}

// writeFileSync replaces a file atomically and durably: write a temporary
// file, fsync it, rename it over the old one, fsync the directory.
func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// bootID is the kernel's id for this boot, reported beside the epoch so
// an operator can tell an agent restart from a reboot.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// allocDir is where one allocation's logs, pid and checkpoint marker live.
func (s *stateDir) allocDir(id string) string { return filepath.Join(s.path, "allocs", id) }
