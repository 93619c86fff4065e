package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/model"
)

// migAgent is a bare agent whose GPU 0 is partitioned 3g+2g+1g+1g.
func migAgent(t *testing.T) *Agent {
	t.Helper()
	return bareAgentWith(t, gpu.FakeConfig{GPUs: 2, UUIDPrefix: "m-", MIG: map[int][]int{0: {3, 2, 1, 1}}})
}

func migShare(id string, milli int, gpus model.GPUMask, cmd ...string) model.DesiredAlloc {
	return model.DesiredAlloc{ID: id, OwnerKind: model.OwnerTraining, OwnerID: "j-" + id, GPUs: gpus, GPUMilli: milli,
		Workload: &model.Workload{Command: cmd}}
}

// TestSharesRunOnMIGInstances: on a partitioned GPU each share gets the
// smallest free instance that holds it, named by its UUID, and no MPS
// limits; one no instance can hold fails to start, saying why; one whose
// instances are all taken waits.
func TestSharesRunOnMIGInstances(t *testing.T) {
	a := migAgent(t)
	inst := a.inv.Devices[0].MIG
	sleep := []string{"/bin/sh", "-c", "env; sleep 30"}

	a.mu.Lock()
	p1 := a.launch(migShare("s1", 300, 1, sleep...)) // 428m (3g) is the smallest ≥ 300
	a.allocs["s1"] = p1
	p2 := a.launch(migShare("s2", 200, 1, sleep...)) // 285m (2g)
	a.allocs["s2"] = p2
	p3 := a.launch(migShare("s3", 100, 1, sleep...)) // 142m (1g)
	a.allocs["s3"] = p3
	_, busy := a.migFor(migShare("s4", 250, 1))
	a.mu.Unlock()

	for id, want := range map[string]gpu.MIGInstance{"s1": inst[0], "s2": inst[1], "s3": inst[2]} {
		env := waitForLog(t, a, id, "BERTH_MIG_INSTANCE")
		for _, line := range []string{"CUDA_VISIBLE_DEVICES=" + want.UUID + "\n", "NVIDIA_VISIBLE_DEVICES=" + want.UUID + "\n",
			"BERTH_MIG_INSTANCE=" + want.Profile() + "\n"} {
			if !strings.Contains(env, line) {
				t.Errorf("%s: environment lacks %q:\n%s", id, line, env)
			}
		}
		if strings.Contains(env, "CUDA_MPS_") {
			t.Errorf("%s: MPS limits on a MIG instance:\n%s", id, env)
		}
	}
	if !errors.Is(busy, errMIGBusy) {
		t.Fatalf("a 250m share with 3g and 2g taken: %v, want it to wait (errMIGBusy)", busy)
	}

	// Nothing on GPU 0 holds 500m: the start fails with the layout.
	a.mu.Lock()
	p := a.launch(migShare("big", 500, 1, "/bin/true"))
	a.mu.Unlock()
	if got := p.actual(); got.State != model.ActualExited || got.ExitCode != 126 {
		t.Fatalf("a 500m share on 3g+2g+1g+1g: %+v, want exited 126", got)
	}
	b, _ := os.ReadFile(filepath.Join(a.state.allocDir("big"), "stderr.log"))
	if !strings.Contains(string(b), "3g.40gb 2g.20gb 1g.10gb 1g.10gb") || !strings.Contains(string(b), "at most 428m") {
		t.Fatalf("stderr does not give the layout and the largest share: %q", b)
	}

	// When s1 exits its 3g instance is free again.
	p1.stop(time.Now(), "test")
	<-p1.done
	a.mu.Lock()
	got, err := a.migFor(migShare("s4", 250, 1))
	a.mu.Unlock()
	if err != nil || got.UUID != inst[0].UUID {
		t.Fatalf("after s1 exits: %v, %v; want the 3g instance", got, err)
	}

	// GPU 1 has no MIG: a share there runs under MPS as before.
	a.mu.Lock()
	q := a.launch(migShare("mps", 300, 2, "/bin/sh", "-c", "env"))
	a.mu.Unlock()
	<-q.done
	if env := readAllocLog(a, "mps"); !strings.Contains(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n") || strings.Contains(env, "BERTH_MIG_INSTANCE") {
		t.Fatalf("a share on GPU 1 (no MIG):\n%s", env)
	}
}

// TestWholeMIGGPUNamesItsInstances: CUDA runs only on instances of a GPU
// in MIG mode, so a whole-GPU allocation sees all of them.
func TestWholeMIGGPUNamesItsInstances(t *testing.T) {
	a := migAgent(t)
	p := a.launch(model.DesiredAlloc{ID: "w", OwnerKind: model.OwnerTraining, OwnerID: "j", GPUs: 0b11,
		Workload: &model.Workload{Command: []string{"/bin/sh", "-c", "env"}}})
	<-p.done
	env := readAllocLog(a, "w")
	want := "CUDA_VISIBLE_DEVICES=MIG-m-0000-fake-0,MIG-m-0000-fake-1,MIG-m-0000-fake-2,MIG-m-0000-fake-3,1\n"
	if !strings.Contains(env, want) {
		t.Fatalf("environment lacks %q:\n%s", want, env)
	}
}

func waitForLog(t *testing.T, a *Agent, id, marker string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s := readAllocLog(a, id); strings.Contains(s, marker) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in its log after 5s", id, marker)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShareRunsOnItsNamedInstance: an allocation that names its instance
// (the scheduler's choice) runs there, not on the smallest that holds it;
// it waits while another share holds that instance, and fails to start
// if the GPU no longer has it.
func TestShareRunsOnItsNamedInstance(t *testing.T) {
	a := migAgent(t)
	inst := a.inv.Devices[0].MIG
	named := func(id string, milli, num int) model.DesiredAlloc {
		d := migShare(id, milli, 1, "/bin/sh", "-c", "env; sleep 30")
		d.MIGInstance = num
		return d
	}
	a.mu.Lock()
	p := a.launch(named("s1", 100, 1)) // the 3g, though a 1g holds 100m
	a.allocs["s1"] = p
	_, busy := a.migFor(named("s2", 100, 1))
	_, gone := a.migFor(named("s3", 100, 9))
	a.mu.Unlock()
	env := waitForLog(t, a, "s1", "BERTH_MIG_INSTANCE")
	if !strings.Contains(env, "CUDA_VISIBLE_DEVICES="+inst[0].UUID+"\n") {
		t.Fatalf("s1 named instance 1 (%s):\n%s", inst[0].UUID, env)
	}
	if !errors.Is(busy, errMIGBusy) {
		t.Fatalf("a share naming the held instance 1: %v, want it to wait", busy)
	}
	if gone == nil || errors.Is(gone, errMIGBusy) || !strings.Contains(gone.Error(), "no instance 9") {
		t.Fatalf("a share naming instance 9 of 4: %v, want a start failure naming it", gone)
	}
}
