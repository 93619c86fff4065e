package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/model"
)

// bareAgent is an agent that never heartbeats: for driving the exec
// driver directly.
func bareAgent(t testing.TB) *Agent {
	t.Helper()
	return bareAgentWith(t, gpu.FakeConfig{GPUs: 8})
}

// bareAgentWith is bareAgent on a fake node of the given shape.
func bareAgentWith(t testing.TB, cfg gpu.FakeConfig) *Agent {
	t.Helper()
	b, err := gpu.NewFake(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Servers: []string{"127.0.0.1:1"}, NodeID: "n1", StateDir: t.TempDir(), Backend: b,
		StrayGrace: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.StopAll(time.Second)
		a.Close()
	})
	return a
}

func helperAlloc(id, kind string, args ...string) model.DesiredAlloc {
	return model.DesiredAlloc{ID: id, OwnerKind: model.OwnerTraining, OwnerID: "j-" + id, GPUs: 0b11,
		Workload: &model.Workload{Command: append([]string{os.Args[0]}, args...), Env: map[string]string{"BERTH_TEST_WORKLOAD": kind}}}
}

// waitReady waits for a helper to print "ready" (its signal handler is
// installed from then on).
func waitReady(t testing.TB, a *Agent, id string) {
	t.Helper()
	eventually(t, id+" ready", func() error {
		b, _ := os.ReadFile(filepath.Join(a.state.allocDir(id), "stdout.log"))
		if !strings.Contains(string(b), "ready") {
			return os.ErrNotExist
		}
		return nil
	})
}

// TestStopOrderingOverManyCycles: SIGTERM first; a process that ignores
// it is SIGKILLed at the deadline and never before; one that exits on
// SIGTERM is not killed; the exit is reported only once it is gone.
func TestStopOrderingOverManyCycles(t *testing.T) {
	a := bareAgent(t)
	const cycles = 12
	const grace = 250 * time.Millisecond
	for i := range cycles {
		stubborn := i%2 == 0
		kind := "polite"
		if stubborn {
			kind = "stubborn"
		}
		id := "c" + strconv.Itoa(i)
		marker := filepath.Join(t.TempDir(), "term")
		p := a.launch(helperAlloc(id, kind, "-marker", marker))
		waitReady(t, a, id)
		pid := p.pgid
		sent := time.Now()
		deadline := sent.Add(grace)
		p.stop(deadline, "test")
		<-p.done
		gone := time.Now()
		got := p.actual()
		if alive(pid) {
			t.Fatalf("cycle %d: exit reported while pid %d still runs", i, pid)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("cycle %d (%s): the process never saw SIGTERM: %v", i, kind, err)
		}
		if stubborn {
			if gone.Before(deadline) {
				t.Fatalf("cycle %d: stubborn process gone %v before its deadline: SIGKILL came early", i, deadline.Sub(gone))
			}
			if !got.Killed || got.ExitCode != 137 {
				t.Fatalf("cycle %d: stubborn process: %+v, want killed with exit 137", i, got)
			}
		} else {
			if got.Killed || got.ExitCode != 0 {
				t.Fatalf("cycle %d: polite process: %+v, want exit 0 on its own", i, got)
			}
			if !gone.Before(deadline) {
				t.Fatalf("cycle %d: polite process took until the deadline", i)
			}
		}
	}
}

// TestGroupOutlivingItsLeader: the leader exits on SIGTERM but leaves a
// child that ignores it. The allocation stays "stopping" (its GPUs held)
// until the child is SIGKILLed at the deadline.
func TestGroupOutlivingItsLeader(t *testing.T) {
	a := bareAgent(t)
	marker := filepath.Join(t.TempDir(), "m")
	p := a.launch(helperAlloc("g1", "abandon", "-marker", marker))
	waitReady(t, a, "g1")
	var child int
	eventually(t, "child started", func() error {
		b, err := os.ReadFile(marker + ".childpid")
		if err != nil {
			return err
		}
		child, err = strconv.Atoi(string(b))
		return err
	})
	eventually(t, "child ready", func() error {
		if strings.Count(readAllocLog(a, "g1"), "ready") < 2 {
			return os.ErrNotExist
		}
		return nil
	})
	deadline := time.Now().Add(600 * time.Millisecond)
	p.stop(deadline, "test")
	time.Sleep(300 * time.Millisecond)
	if got := p.actual(); got.State != model.ActualStopping {
		t.Fatalf("leader gone, child alive: state %s, want stopping", got.State)
	}
	if !alive(child) {
		t.Fatalf("child %d died before the deadline", child)
	}
	<-p.done
	if time.Now().Before(deadline) || alive(child) {
		t.Fatalf("exit reported before the deadline or with the child (%d) alive", child)
	}
	if got := p.actual(); !got.Killed {
		t.Fatalf("%+v: want killed (the group needed SIGKILL)", got)
	}
}

func readAllocLog(a *Agent, id string) string {
	b, _ := os.ReadFile(filepath.Join(a.state.allocDir(id), "stdout.log"))
	return string(b)
}

// TestEnvironment: GPUs, ids and the checkpoint contract reach the
// process; the agent's own secrets do not.
func TestEnvironment(t *testing.T) {
	t.Setenv("BERTH_TOKEN", "secret-must-not-leak")
	a := bareAgent(t)
	d := model.DesiredAlloc{ID: "e1", OwnerKind: model.OwnerTraining, OwnerID: "job-1", GPUs: 0b1010_0000,
		CheckpointDir: "/ck", Restore: "/ck/step-3.json",
		Workload: &model.Workload{Command: []string{"/bin/sh", "-c", "env"}, Env: map[string]string{"MINE": "1", "BERTH_JOB_ID": "forged"}}}
	p := a.launch(d)
	<-p.done
	env := readAllocLog(a, "e1")
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=5,7\n", "NVIDIA_VISIBLE_DEVICES=5,7\n", "BERTH_JOB_ID=job-1\n",
		"BERTH_ALLOC_ID=e1\n", "BERTH_CHECKPOINT_DIR=/ck\n", "BERTH_RESTORE=/ck/step-3.json\n", "BERTH_GPUS=2\n", "MINE=1\n", "BERTH_NODE_ID=n1\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("environment lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(env, "secret-must-not-leak") || strings.Contains(env, "forged") {
		t.Errorf("environment leaks the agent's token or lets a workload forge berth's variables:\n%s", env)
	}
}

// TestStartFailureIsAnExit: a missing command is exit 127, reported like
// any exit, with the reason in the allocation's log.
func TestStartFailureIsAnExit(t *testing.T) {
	a := bareAgent(t)
	d := model.DesiredAlloc{ID: "f1", OwnerKind: model.OwnerTraining, OwnerID: "j", GPUs: 1,
		Workload: &model.Workload{Command: []string{"/nonexistent/berth-test"}}}
	p := a.launch(d)
	<-p.done
	if got := p.actual(); got.State != model.ActualExited || got.ExitCode != 127 {
		t.Fatalf("%+v: want exited 127", got)
	}
	b, _ := os.ReadFile(filepath.Join(a.state.allocDir("f1"), "stderr.log"))
	if !strings.Contains(string(b), "failed to start") {
		t.Fatalf("stderr log does not say why: %q", b)
	}
}
