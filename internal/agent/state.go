package agent

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/berthsched/berth/internal/atomicfile"
)

// stateDir is the agent's directory: a lock so only one agent uses it,
// the node's identity (its UUID, the boot epoch counter and the boot id
// the epoch was taken in), and one directory per allocation.
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
	cur, err := s.readEpoch()
	if err != nil {
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
func writeFileSync(path string, data []byte) error { return writeFileMode(path, data, 0o644) }

// writeFileMode is writeFileSync with the file's permissions.
func writeFileMode(path string, data []byte, perm os.FileMode) error {
	return atomicfile.Write(path, data, perm)
}

// identity is who this node is (R5): the UUID created in the state
// directory the first time (a wiped directory or a new machine gets a new
// one), the boot id, and the epoch. The epoch moves only when the boot id
// differs from the one it was taken in: an agent restarted in the same
// boot is the same incarnation, and adopts the work still running; after
// a reboot nothing survived, and the new epoch says so. fresh reports
// that the epoch moved.
func (s *stateDir) identity(boot string) (uuid string, epoch uint64, fresh bool, err error) {
	if uuid, err = s.nodeUUID(); err != nil {
		return "", 0, false, err
	}
	p := filepath.Join(s.path, "boot-id")
	last, rerr := os.ReadFile(p)
	if rerr == nil && boot != "" && strings.TrimSpace(string(last)) == boot {
		if epoch, err = s.readEpoch(); err != nil || epoch > 0 {
			return uuid, epoch, false, err
		}
	}
	if epoch, err = s.nextEpoch(); err != nil {
		return "", 0, false, err
	}
	if err := writeFileSync(p, []byte(boot+"\n")); err != nil {
		return "", 0, false, fmt.Errorf("persist boot id: %w", err)
	}
	return uuid, epoch, true, nil
}

// nodeUUID reads the node's UUID, creating it on first use.
func (s *stateDir) nodeUUID() (string, error) {
	p := filepath.Join(s.path, "node-uuid")
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if len(id) != 36 {
			return "", fmt.Errorf("%s is corrupt (%q): it holds the node's identity; remove it along with this node's state", p, b)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	r[6], r[8] = r[6]&0x0f|0x40, r[8]&0x3f|0x80 // version 4, RFC 4122 variant
	id := fmt.Sprintf("%x-%x-%x-%x-%x", r[0:4], r[4:6], r[6:8], r[8:10], r[10:16])
	if err := writeFileSync(p, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("persist node uuid: %w", err)
	}
	return id, nil
}

// readEpoch is the persisted epoch, 0 when there is none.
func (s *stateDir) readEpoch() (uint64, error) {
	p := filepath.Join(s.path, "epoch")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	cur, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is corrupt (%q): it holds the boot epoch; restore it or remove it along with this node's state", p, b)
	}
	return cur, nil
}

// bootID is the kernel's id for this boot: with it the agent tells its own
// restart (same boot: adopt the work) from a reboot (new epoch).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// allocDir is where one allocation's logs, pid and checkpoint marker live.
func (s *stateDir) allocDir(id string) string { return filepath.Join(s.path, "allocs", id) }
