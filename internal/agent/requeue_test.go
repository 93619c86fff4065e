package agent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/server"
)

// TestFaultEveryRequeueKeepsTheCheckpoint: whatever ends a training
// allocation, the job goes back to the queue from the last checkpoint
// its process recorded (periodic or on SIGTERM), because a running
// allocation reports its checkpoint in every heartbeat: a node lost
// without a word, a GPU quarantined for an XID, a preemption that ends
// in SIGKILL at the deadline. (The reboot and replacement paths are
// TestRebootIsANewEpoch and the ha package's TestFaultNode….)
func TestFaultEveryRequeueKeepsTheCheckpoint(t *testing.T) {
	f := newFleetWith(t, func(c *server.Config) { c.Control.Sched.Storage.MinDeadline = time.Second })
	requeuedFromCheckpoint := func(job, reason string) {
		t.Helper()
		eventually(t, job+" requeued for "+reason+" with its checkpoint", func() error {
			j := f.job(job)
			if !slices.ContainsFunc(j.History, func(e model.Event) bool { return e.Event == "requeued" && e.Detail == reason }) {
				return fmt.Errorf("no %s requeue: %v", reason, j.History)
			}
			if !strings.Contains(j.Run().Restore, "step-") {
				return fmt.Errorf("restore point %q", j.Run().Restore)
			}
			return nil
		})
	}
	recorded := func(job string) string {
		t.Helper()
		var ck string
		eventually(t, job+" recorded a periodic checkpoint", func() error {
			if ck = f.job(job).Run().Restore; ck == "" {
				return fmt.Errorf("none yet")
			}
			return nil
		})
		return ck
	}
	train := func(name string) string {
		return f.submit(api.JobRequest{Name: name, GPUs: 8, Preemptible: true,
			Checkpoint: &api.CheckpointRequest{Path: t.TempDir(), Bytes: 1 << 20}},
			"train", "-steps", "1000000", "-step-time", "10ms", "-checkpoint-every", "20")
	}

	t.Run("node lost", func(t *testing.T) {
		n1 := f.startAgent("lost-1", "")
		j := train("on-a-node-that-goes")
		a := f.running(n1, j)
		pid := n1.pid(t, a)
		recorded(j)
		f.stopAgent("lost-1", false) // silence: no exit, no epoch, nothing
		killGroup(pid)
		requeuedFromCheckpoint(j, "node_lost")
		f.api.CancelJob(t.Context(), j)
	})

	t.Run("XID quarantine", func(t *testing.T) {
		n := f.startAgent("xid-1", "")
		j := train("on-a-failing-gpu")
		f.running(n, j)
		recorded(j)
		if err := gpu.Inject(n.inject, gpu.Injection{GPU: 3, XID: 79, Message: "GPU has fallen off the bus"}); err != nil {
			t.Fatal(err)
		}
		requeuedFromCheckpoint(j, "gpu_fault")
		f.api.CancelJob(t.Context(), j)
		f.stopAgent("xid-1", true)
	})

	t.Run("deadline kill", func(t *testing.T) {
		n := f.startAgent("kill-1", "")
		// Ignores SIGTERM, checkpoints every 100 ms: only the deadline's
		// SIGKILL ends it, and what it recorded last must be kept.
		script := `trap '' TERM; i=0; while :; do i=$((i+1)); echo "$BERTH_CHECKPOINT_DIR/step-$i" > "$BERTH_ALLOC_DIR/checkpoint"; sleep 0.1; done`
		acc, err := f.api.SubmitJob(t.Context(), api.JobRequest{Name: "stubborn", Team: "t", GPUs: 8, Topology: "node", Preemptible: true,
			Priority: 0, Checkpoint: &api.CheckpointRequest{Path: t.TempDir(), Bytes: 1 << 20}, Command: []string{"/bin/sh", "-c", script}}, "")
		if err != nil {
			t.Fatal(err)
		}
		f.running(n, acc.JobID)
		recorded(acc.JobID)
		urgent := f.submit(api.JobRequest{Name: "urgent", GPUs: 8, Priority: 1000}, "train", "-steps", "1000000", "-step-time", "50ms")
		eventually(t, "the stubborn job killed at its deadline", func() error {
			j := f.job(acc.JobID)
			if !slices.ContainsFunc(j.History, func(e model.Event) bool {
				return e.Event == "allocation_gone" && strings.Contains(e.Detail, "exit 137")
			}) {
				u := f.job(urgent)
				return fmt.Errorf("not killed yet: %v; urgent %s %+v", j.History, u.State, u.PendingReason)
			}
			return nil
		})
		requeuedFromCheckpoint(acc.JobID, "preempted")
		if ck := f.job(acc.JobID).Run().Restore; !strings.HasPrefix(filepath.Base(ck), "step-") {
			t.Errorf("restore %q", ck)
		}
		f.api.CancelJob(t.Context(), acc.JobID)
		f.api.CancelJob(t.Context(), urgent)
	})
}

// killGroup is the node dying under its work.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
