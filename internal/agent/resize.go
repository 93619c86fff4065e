package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/berthsched/berth/internal/atomicfile"
	"github.com/berthsched/berth/internal/model"
)

// sizeFile holds an elastic job's current size in its allocation
// directory (BERTH_SIZE_FILE): one decimal number and a newline.
const sizeFile = "size"

func writeSize(dir string, gpus int) error {
	return atomicfile.Write(filepath.Join(dir, sizeFile), []byte(strconv.Itoa(gpus)+"\n"), 0o644)
}

func readSize(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, sizeFile))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// resize tells a running elastic workload that its job now runs at gpus:
// the size file first (whole or not at all), then SIGUSR1 to the process
// group. The file is the record, so an agent restarted in between neither
// misses a change nor signals one twice.
func (p *alloc) resize(gpus int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != model.ActualRunning || p.hold || p.pgid == 0 || readSize(p.dir) == gpus {
		return
	}
	if err := writeSize(p.dir, gpus); err != nil {
		p.log.Warn("cannot write the new job size", "gpus", gpus, "err", err)
		return
	}
	p.log.Info("elastic job resized: SIGUSR1 to the process group", "gpus", gpus)
	if err := signalGroup(p.pgid, syscall.SIGUSR1); err != nil {
		p.log.Warn("SIGUSR1 failed", "err", err)
	}
}
