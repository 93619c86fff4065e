package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/atomicfile"
)

// TrainConfig is `berth workload train`.
type TrainConfig struct {
	Steps    int
	StepTime time.Duration
	// CheckpointEvery writes a checkpoint every so many steps as well as
	// on SIGTERM (0: only on SIGTERM).
	CheckpointEvery int
	// CheckpointBytes is the size of the training state the stand-in
	// pretends to write, and CheckpointBandwidth how fast its storage
	// takes it (bytes/s; 0: as fast as the file write). A checkpoint then
	// takes bytes / bandwidth, which is what a slow cluster filesystem
	// looks like to the agent.
	CheckpointBytes     int64
	CheckpointBandwidth float64
	// Elastic follows the job's size (§9.4): on each value from Resize
	// (SIGUSR1) it reads $BERTH_SIZE_FILE, checkpoints, and carries on
	// at the new size, the restart point a torchrun job would take.
	Elastic bool
	Resize  <-chan struct{}
	Out     io.Writer
}

// CheckpointStats is what a workload tells its agent about the checkpoint
// it just wrote, in the file $BERTH_CHECKPOINT_STATS names (R3): its size
// and how long the write took, so the control plane can measure the
// storage bandwidth preemption deadlines are set from.
type CheckpointStats struct {
	Bytes   int64     `json:"bytes"`
	Seconds float64   `json:"seconds"`
	At      time.Time `json:"at"`
}

// Checkpoint is what the stand-in trainer saves.
type Checkpoint struct {
	Job  string    `json:"job"`
	Step int       `json:"step"`
	At   time.Time `json:"at"`
}

// ErrPreempted is returned when a stop request ended the run after a
// checkpoint; the process exits 143, as a process ended by SIGTERM does.
var ErrPreempted = errors.New("stopped by SIGTERM after checkpointing")

// Train runs steps until done or until stop is closed (SIGTERM), then
// checkpoints. It resumes from BERTH_RESTORE.
func Train(stop <-chan struct{}, cfg TrainConfig) error {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Steps < 1 {
		return fmt.Errorf("--steps: %d: expected at least 1", cfg.Steps)
	}
	if cfg.StepTime <= 0 {
		return fmt.Errorf("--step-time: %v: expected a positive duration", cfg.StepTime)
	}
	if cfg.CheckpointEvery < 0 {
		return fmt.Errorf("--checkpoint-every: %d: expected 0 or more", cfg.CheckpointEvery)
	}
	if cfg.CheckpointBytes < 0 || cfg.CheckpointBandwidth < 0 {
		return fmt.Errorf("--checkpoint-bytes, --checkpoint-bandwidth: %d, %g: expected 0 or more", cfg.CheckpointBytes, cfg.CheckpointBandwidth)
	}
	job := os.Getenv("BERTH_JOB_ID")
	if job == "" {
		job = "train"
	}
	step := 0
	if r := os.Getenv("BERTH_RESTORE"); r != "" {
		ck, err := readCheckpoint(r)
		if err != nil {
			return fmt.Errorf("BERTH_RESTORE: %w", err)
		}
		step = ck.Step
		fmt.Fprintf(cfg.Out, "resumed from %s at step %d\n", r, step)
	} else {
		fmt.Fprintf(cfg.Out, "starting at step 0 of %d\n", cfg.Steps)
	}
	size := 0
	if cfg.Elastic {
		size = jobSize(0)
		fmt.Fprintf(cfg.Out, "elastic: running at %d GPUs\n", size)
	}
	t := time.NewTicker(cfg.StepTime)
	defer t.Stop()
	for step < cfg.Steps {
		select {
		case <-cfg.Resize:
			if !cfg.Elastic {
				continue
			}
			n := jobSize(size)
			if n == size {
				continue
			}
			path, err := saveCheckpoint(cfg, job, step)
			if err != nil {
				return fmt.Errorf("checkpoint on resize: %w", err)
			}
			fmt.Fprintf(cfg.Out, "resized: %d to %d GPUs; checkpointed step %d to %s; continuing at %d\n", size, n, step, path, n)
			size = n
			continue
		case <-stop:
			path, err := saveCheckpoint(cfg, job, step)
			if err != nil {
				return fmt.Errorf("checkpoint on SIGTERM: %w", err)
			}
			fmt.Fprintf(cfg.Out, "SIGTERM: checkpointed step %d to %s\n", step, path)
			return ErrPreempted
		case <-t.C:
		}
		step++
		if cfg.Elastic {
			fmt.Fprintf(cfg.Out, "step %d/%d at %d GPUs\n", step, cfg.Steps, size)
		} else {
			fmt.Fprintf(cfg.Out, "step %d/%d\n", step, cfg.Steps)
		}
		if cfg.CheckpointEvery > 0 && step%cfg.CheckpointEvery == 0 && step < cfg.Steps {
			path, err := saveCheckpoint(cfg, job, step)
			if err != nil {
				return fmt.Errorf("checkpoint: %w", err)
			}
			fmt.Fprintf(cfg.Out, "checkpointed step %d to %s\n", step, path)
		}
	}
	fmt.Fprintf(cfg.Out, "done: %d steps\n", step)
	return nil
}

// jobSize is the job's size: $BERTH_SIZE_FILE when it names a readable
// number, else $BERTH_JOB_GPUS, else old.
func jobSize(old int) int {
	if f := os.Getenv("BERTH_SIZE_FILE"); f != "" {
		if b, err := os.ReadFile(f); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
				return n
			}
		}
	}
	if n, err := strconv.Atoi(os.Getenv("BERTH_JOB_GPUS")); err == nil && n > 0 && old == 0 {
		return n
	}
	return old
}

func readCheckpoint(path string) (Checkpoint, error) {
	var ck Checkpoint
	b, err := os.ReadFile(path)
	if err != nil {
		return ck, err
	}
	if err := json.Unmarshal(b, &ck); err != nil {
		return ck, fmt.Errorf("%s is not a checkpoint: %w", path, err)
	}
	if ck.Step < 0 {
		return ck, fmt.Errorf("%s: step %d", path, ck.Step)
	}
	return ck, nil
}

// saveCheckpoint writes the checkpoint atomically into BERTH_CHECKPOINT_DIR
// (the allocation's directory when unset), then names it in
// $BERTH_ALLOC_DIR/checkpoint, where the agent looks when the process
// exits.
func saveCheckpoint(cfg TrainConfig, job string, step int) (string, error) {
	began := time.Now()
	dir := os.Getenv("BERTH_CHECKPOINT_DIR")
	if dir == "" {
		dir = os.Getenv("BERTH_ALLOC_DIR")
	}
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path, err := filepath.Abs(filepath.Join(dir, fmt.Sprintf("%s-step-%d.json", job, step)))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(Checkpoint{Job: job, Step: step, At: time.Now().UTC()})
	if cfg.CheckpointBandwidth > 0 && cfg.CheckpointBytes > 0 {
		// The stand-in's training state is a few bytes; the storage it
		// pretends to fill takes as long as the real state would.
		time.Sleep(time.Duration(float64(cfg.CheckpointBytes) / cfg.CheckpointBandwidth * float64(time.Second)))
	}
	if err := atomicWrite(path, b); err != nil {
		return "", err
	}
	if sp := os.Getenv("BERTH_CHECKPOINT_STATS"); sp != "" {
		size := cfg.CheckpointBytes
		if size == 0 {
			size = int64(len(b))
		}
		st, _ := json.Marshal(CheckpointStats{Bytes: size, Seconds: time.Since(began).Seconds(), At: time.Now().UTC()})
		if err := atomicWrite(sp, st); err != nil {
			return "", err
		}
	}
	if ad := os.Getenv("BERTH_ALLOC_DIR"); ad != "" {
		if err := atomicWrite(filepath.Join(ad, "checkpoint"), []byte(path+"\n")); err != nil {
			return "", err
		}
	}
	return path, nil
}

// atomicWrite replaces path with b whole (the members of a gang write
// the same checkpoint name at once: the last one wins, whole).
func atomicWrite(path string, b []byte) error { return atomicfile.Write(path, b, 0o644) }
