package agent

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// alloc is one allocation on this node and the process group running it.
// A supervisor goroutine owns the process; Stop and Kill only move its
// deadline and wake it.
type alloc struct {
	id    string
	dir   string
	gpus  model.GPUMask
	milli int    // a share of its one GPU; 0 for whole GPUs
	mig   string // the MIG instance a share runs on
	log   *slog.Logger
	// changed is called (without locks held) when the state changes, so
	// the agent can report it at once instead of at the next interval.
	changed func()

	mu         sync.Mutex
	state      model.ActualState
	exitCode   int
	killed     bool
	checkpoint string
	readiness  *model.Readiness // the replica's check; nil: ready when running
	ready      bool
	hold       bool // no command: the allocation only holds its GPUs
	pgid       int
	cgDir      string
	deadline   time.Time // SIGKILL at this instant; zero: not stopping
	termSent   bool
	killSent   bool
	leaderDone bool
	agentStop  bool            // stopped by the agent shutting down all work
	logMax     int64           // cap on each of stdout.log and stderr.log
	sizes      [2][]sizeSample // stdout's and stderr's sizes over time
	// ctr is the container the allocation runs in ("" for exec): it
	// outlives a killed podman client, so the allocation has ended only
	// once the container is removed (ctrGone).
	ctr     string
	ctrCfg  ContainerConfig
	ctrRm   bool // removal started
	ctrGone bool
	// From the shim's status: the kernel's OOM kill, a start that failed.
	oom      bool
	startErr string

	wake chan struct{}
	done chan struct{}
}

func newAlloc(id, dir string, gpus model.GPUMask, log *slog.Logger, changed func()) *alloc {
	return &alloc{id: id, dir: dir, gpus: gpus, log: log.With("alloc", id), changed: changed,
		state: model.ActualStarting, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// actual is what the heartbeat says about this allocation.
func (p *alloc) actual() model.ActualAlloc {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != model.ActualExited {
		// Reported while it runs, so the control plane holds the last
		// checkpoint whatever ends the allocation (R5, node lost, XID).
		p.checkpoint = readCheckpoint(p.dir)
	}
	return model.ActualAlloc{ID: p.id, State: p.state, ExitCode: p.exitCode, Killed: p.killed, Checkpoint: p.checkpoint,
		AgentStop: p.agentStop && p.state == model.ActualExited, OOMKilled: p.oom, StartError: p.startErr,
		CheckpointStats: readStats(p.dir), Ready: p.state == model.ActualRunning && (p.readiness == nil || p.ready)}
}

// readCheckpoint is the checkpoint the workload last recorded in its
// allocation directory ($BERTH_ALLOC_DIR/checkpoint), "" for none.
func readCheckpoint(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil || len(b) >= 4096 {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// statsFile is where a workload reports its last checkpoint's size and
// write time ($BERTH_CHECKPOINT_STATS).
const statsFile = "checkpoint-stats"

// readStats reads the workload's checkpoint report, or nil when there is
// none or it does not make sense (the workload writes it; the agent
// trusts it no further than its shape).
func readStats(dir string) *model.CheckpointStats {
	b, err := os.ReadFile(filepath.Join(dir, statsFile))
	if err != nil || len(b) > 4096 {
		return nil
	}
	var st model.CheckpointStats
	if json.Unmarshal(b, &st) != nil || st.Bytes <= 0 || st.Seconds <= 0 || st.At.IsZero() {
		return nil
	}
	return &st
}

func (p *alloc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == model.ActualExited
}

// stop asks the process group to exit by the deadline: SIGTERM now (once),
// SIGKILL at the deadline unless everything is gone by then. A later
// stop can bring the deadline forward, never push it back.
func (p *alloc) stop(deadline time.Time, why string) {
	p.mu.Lock()
	if p.state == model.ActualExited {
		p.mu.Unlock()
		return
	}
	if p.hold || p.pgid == 0 {
		p.finishLocked(0)
		p.mu.Unlock()
		p.changed()
		return
	}
	if p.deadline.IsZero() || deadline.Before(p.deadline) {
		p.deadline = deadline
	}
	if !p.termSent {
		p.termSent = true
		p.state = model.ActualStopping
		p.log.Info("stopping: SIGTERM to the process group", "why", why, "deadline", deadline.Format(time.RFC3339Nano))
		if err := signalGroup(p.pgid, syscall.SIGTERM); err != nil {
			p.log.Warn("SIGTERM failed", "err", err)
		}
	}
	p.mu.Unlock()
	p.poke()
	p.changed()
}

// kill moves the deadline to now: the control plane says it has passed.
func (p *alloc) kill(why string) { p.stop(time.Now(), why) }

func (p *alloc) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// supervise owns the process from start to the moment its whole group is
// gone. Only then is the allocation reported exited: its GPUs are free.
// leader delivers the group leader's (the shim's) exit code, -1 when it is
// not known. Every second it also keeps the logs under their cap.
func (p *alloc) supervise(leader <-chan int, strayGrace time.Duration) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	logs := time.NewTicker(time.Second)
	defer logs.Stop()
	for {
		p.mu.Lock()
		next := time.Hour
		if p.leaderDone {
			next = 20 * time.Millisecond // waiting for the rest of the group
		}
		if !p.deadline.IsZero() && !p.killSent {
			next = max(0, min(next, time.Until(p.deadline)))
		}
		p.mu.Unlock()
		timer.Reset(next)
		select {
		case code := <-leader:
			leader = nil
			p.mu.Lock()
			p.leaderDone = true
			p.exitCode = code
			if code < 0 && p.killSent {
				p.exitCode = 128 + int(syscall.SIGKILL)
			}
			p.mu.Unlock()
		case <-logs.C:
			now := time.Now()
			for i, name := range []string{"stdout.log", "stderr.log"} {
				path := filepath.Join(p.dir, name)
				if err := capLog(path, p.logMax); err != nil {
					p.log.Warn("log not capped", "log", name, "err", err)
				}
				if st, err := os.Stat(path); err == nil {
					p.sample(i, st.Size(), now)
				}
			}
		case <-timer.C:
		case <-p.wake:
		}
		p.mu.Lock()
		if !p.deadline.IsZero() && !p.killSent && !time.Now().Before(p.deadline) {
			p.killSent, p.killed = true, true
			p.log.Warn("deadline passed: SIGKILL to the process group")
			_ = signalGroup(p.pgid, syscall.SIGKILL)
			if p.cgDir != "" {
				_ = killCgroup(p.cgDir)
			}
			p.removeContainerLocked(0)
		}
		if p.leaderDone {
			// The shim removes the container it ran; this is for one it
			// could not (killed, or its podman client was).
			p.removeContainerLocked(strayGrace)
			if !groupAlive(p.pgid) && (p.cgDir == "" || !populated(p.cgDir)) && (p.ctr == "" || p.ctrGone) {
				p.finishLocked(p.exitCode)
				p.mu.Unlock()
				p.changed()
				return
			}
			if !p.termSent {
				// The leader is gone but left processes behind: they get
				// the same treatment as a stop.
				p.termSent = true
				p.deadline = time.Now().Add(strayGrace)
				p.log.Info("leader exited with processes left in its group: SIGTERM to them")
				_ = signalGroup(p.pgid, syscall.SIGTERM)
			}
		}
		p.mu.Unlock()
	}
}

// removeContainerLocked starts removing the allocation's container, once:
// SIGTERM, grace, SIGKILL, then gone. It retries while podman fails: the
// GPUs stay held while a container may still run on them.
func (p *alloc) removeContainerLocked(grace time.Duration) {
	if p.ctr == "" || p.ctrRm {
		return
	}
	p.ctrRm = true
	if st, ok := readShimStatus(p.dir); ok && st.Removed && !p.killSent {
		p.ctrGone = true // the shim saw it end and removed it
		return
	}
	go func() {
		for {
			err := p.ctrCfg.removeContainer(p.ctr, grace)
			if err == nil {
				break
			}
			p.log.Error("container not removed; retrying", "err", err)
			time.Sleep(5 * time.Second)
		}
		p.mu.Lock()
		p.ctrGone = true
		p.mu.Unlock()
		p.poke()
	}()
}

// finishLocked records the exit; the caller holds p.mu.
func (p *alloc) finishLocked(code int) {
	p.state, p.exitCode = model.ActualExited, code
	if st, ok := readShimStatus(p.dir); ok {
		p.oom = st.OOMKilled
		if st.Error != "" {
			p.startErr = st.Error
		}
	}
	p.checkpoint = readCheckpoint(p.dir)
	// The exit record first, then the pid file goes: an agent restarted
	// in between finds the record and reports the exit it could not see.
	rec, _ := json.Marshal(model.ActualAlloc{ID: p.id, State: p.state, ExitCode: p.exitCode, Killed: p.killed,
		Checkpoint: p.checkpoint, AgentStop: p.agentStop, OOMKilled: p.oom, StartError: p.startErr})
	_ = writeFileSync(filepath.Join(p.dir, "exit"), append(rec, '\n'))
	_ = os.Remove(filepath.Join(p.dir, "pid"))
	if p.cgDir != "" {
		_ = os.Remove(p.cgDir)
	}
	p.log.Info("allocation exited", "exit_code", p.exitCode, "killed", p.killed, "oom_killed", p.oom, "checkpoint", p.checkpoint)
	close(p.done)
}

// note writes a line from the agent into the allocation's stderr log: how
// a job hears of an application-level GPU error on its GPUs.
func (p *alloc) note(format string, args ...any) {
	appendLine(filepath.Join(p.dir, "stderr.log"), format, args...)
}

// exitCode follows the shell: 128+n for death by signal n.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
