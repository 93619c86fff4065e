package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent/ctrtest"
	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/server"
)

// testImage is an image built here, without a registry (ctrtest).
const testImage = ctrtest.Image

// podmanConfig is the container driver on this machine: a real podman
// with Debian's runc, ulimits below the sandbox's hard limits, and no CDI
// spec (fake GPUs).
func podmanConfig(t testing.TB) ContainerConfig {
	t.Helper()
	podman, err := ctrtest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	return ContainerConfig{Podman: podman, Runtime: ctrtest.Runtime, Pull: "missing", CDIDirs: []string{t.TempDir()}, Args: ctrtest.Args}
}

// containerAgent is a bare agent (no heartbeats) whose state is dir,
// with the container driver configured.
func containerAgent(t testing.TB, cc ContainerConfig, dir, boot string) *Agent {
	t.Helper()
	b, err := gpu.NewFake(gpu.FakeConfig{GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Servers: []string{"127.0.0.1:1"}, NodeID: "n1", StateDir: dir, Backend: b, BootID: boot,
		StrayGrace: 300 * time.Millisecond, OrphanGrace: time.Second, Container: cc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Whatever a failed test left: containers outlive the test process.
	t.Cleanup(func() { ctrtest.Remove(cc.Podman, dir) })
	return a
}

func imageAlloc(id, script string) model.DesiredAlloc {
	return model.DesiredAlloc{ID: id, OwnerKind: model.OwnerTraining, OwnerID: "job-" + id, GPUs: 0b1010_0000,
		Workload: &model.Workload{Image: testImage, Command: []string{"sh", "-c", script}, Env: map[string]string{"MINE": "1"}}}
}

func containerExists(cc ContainerConfig, name string) bool { return ctrtest.Exists(cc.Podman, name) }

func waitFor(t testing.TB, what string, limit time.Duration, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestContainerGPUsLimitsLogs: an image runs with exactly its GPUs named
// in its environment, berth's variables, its own, the CPU and memory it
// asked for as the container's limits, its directories mounted; its
// stdout and stderr are the allocation's logs; its exit code is the
// allocation's; the container is removed after. The agent's token does
// not reach it.
func TestContainerGPUsLimitsLogs(t *testing.T) {
	cc := podmanConfig(t)
	t.Setenv("BERTH_TOKEN", "secret-must-not-leak")
	a := containerAgent(t, cc, t.TempDir(), "")
	defer a.Close()
	ck := t.TempDir()
	d := imageAlloc("c1", `env; echo "mem=$(cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null)"; `+
		`echo "cpu=$(cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null)"; `+
		`echo written > "$BERTH_CHECKPOINT_DIR/probe"; echo to-stderr >&2; exit 3`)
	d.CPUMilli, d.MemoryMiB, d.CheckpointDir, d.Restore = 500, 64, ck, filepath.Join(ck, "step-3")
	d.Workload.Env["PATH"] = "/bin:/job/bin" // the job's own PATH, without podman's directory
	p := a.launch(d)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the container did not end")
	}
	if got := p.actual(); got.ExitCode != 3 || got.Killed || got.OOMKilled {
		t.Fatalf("%+v: want exit 3, not killed", got)
	}
	out, errs := readAllocLog(a, "c1"), readLog2(a, "c1", "stderr.log")
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=5,7\n", "NVIDIA_VISIBLE_DEVICES=5,7\n", "BERTH_JOB_ID=job-c1\n", "BERTH_ALLOC_ID=c1\n",
		"BERTH_GPUS=2\n", "BERTH_RESTORE=" + filepath.Join(ck, "step-3") + "\n", "BERTH_CHECKPOINT_DIR=" + ck + "\n", "MINE=1\n", "PATH=/bin:/job/bin\n",
		"mem=67108864\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("container output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "cpu=50000") {
		t.Errorf("CPU limit: want a quota of 50000 per 100000 µs (0.5 CPU):\n%s", out)
	}
	if strings.Contains(out, "secret-must-not-leak") {
		t.Errorf("the agent's token reached the container:\n%s", out)
	}
	if !strings.Contains(errs, "to-stderr") {
		t.Errorf("stderr log: %q", errs)
	}
	if b, _ := os.ReadFile(filepath.Join(ck, "probe")); string(b) != "written\n" {
		t.Errorf("the checkpoint directory is not the host's, read-write: %q", b)
	}
	if containerExists(cc, containerName("c1")) {
		t.Error("the container is left after the allocation ended")
	}
}

func readLog2(a *Agent, id, name string) string {
	b, _ := os.ReadFile(filepath.Join(a.state.allocDir(id), name))
	return string(b)
}

// TestContainerStops: SIGTERM reaches the workload inside the container
// (it checkpoints and exits 0, not killed); one that ignores it is
// SIGKILLed at the deadline, never before, and the container is gone
// before the allocation is reported exited.
func TestContainerStops(t *testing.T) {
	cc := podmanConfig(t)
	a := containerAgent(t, cc, t.TempDir(), "")
	defer a.Close()
	ck := t.TempDir()
	polite := imageAlloc("polite", `trap 'echo "$BERTH_CHECKPOINT_DIR/step-7" > "$BERTH_ALLOC_DIR/checkpoint"; exit 0' TERM; echo ready; while :; do sleep 0.1; done`)
	polite.CheckpointDir = ck
	stubborn := imageAlloc("stubborn", `trap '' TERM; echo ready; while :; do sleep 0.1; done`)
	pp, ps := a.launch(polite), a.launch(stubborn)
	waitReady(t, a, "polite")
	waitReady(t, a, "stubborn")

	pp.stop(time.Now().Add(20*time.Second), "test")
	<-pp.done
	if got := pp.actual(); got.ExitCode != 0 || got.Killed || got.Checkpoint != filepath.Join(ck, "step-7") {
		t.Errorf("polite: %+v: want exit 0, not killed, checkpoint %s", got, filepath.Join(ck, "step-7"))
	}

	t0 := time.Now()
	ps.stop(t0.Add(1500*time.Millisecond), "test")
	<-ps.done
	took := time.Since(t0)
	if got := ps.actual(); !got.Killed || got.ExitCode != 137 {
		t.Errorf("stubborn: %+v: want killed, exit 137", got)
	}
	if took < 1500*time.Millisecond {
		t.Errorf("stubborn killed after %v, before its deadline", took)
	}
	for _, n := range []string{"polite", "stubborn"} {
		if containerExists(cc, containerName(n)) {
			t.Errorf("container %s left after the allocation was reported exited", n)
		}
	}
}

// TestContainerOutlivesTheAgent: the agent dies (no stop, no goodbye);
// the container runs on; the next agent of the same boot adopts it and
// can stop it, and removes a labelled container no allocation owns. The
// agent of a new boot (a reboot) removes what the old one left.
func TestContainerOutlivesTheAgent(t *testing.T) {
	cc := podmanConfig(t)
	dir := t.TempDir()
	a1 := containerAgent(t, cc, dir, "boot-1")
	d := imageAlloc("kept", `trap 'exit 0' TERM; echo ready; while :; do sleep 0.1; done`)
	a1.launch(d)
	waitReady(t, a1, "kept")
	a1.Close() // its work is not stopped: a kill -9 as far as the container knows

	stray := exec.Command(cc.Podman, cc.global([]string{"run", "--detach", "--name", "berth-stray", "--label", "berth.state=" + dir,
		"--network", "host", "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1000:1000", "--", testImage, "sleep", "600"})...)
	if out, err := stray.CombinedOutput(); err != nil {
		t.Fatalf("starting a stray container: %v: %s", err, out)
	}
	defer cc.removeContainer("berth-stray", 0)

	a2 := containerAgent(t, cc, dir, "boot-1")
	p := a2.allocs["kept"]
	if p == nil || p.actual().State != model.ActualRunning || p.ctr != containerName("kept") {
		a2.Close()
		t.Fatalf("the restarted agent did not adopt the running container: %+v", p)
	}
	if !containerExists(cc, containerName("kept")) {
		t.Error("the container did not outlive its agent")
	}
	if containerExists(cc, "berth-stray") {
		t.Error("a labelled container no allocation owns was left running")
	}
	p.stop(time.Now().Add(20*time.Second), "test")
	<-p.done
	if got := p.actual(); got.ExitCode != 0 || got.Killed {
		t.Errorf("adopted container stopped: %+v: want exit 0, not killed", got)
	}
	if containerExists(cc, containerName("kept")) {
		t.Error("the adopted container was not removed once stopped")
	}

	// A reboot: the new boot's agent finds a container of the old one.
	d2 := imageAlloc("rebooted", `trap '' TERM; echo ready; while :; do sleep 0.1; done`)
	a2.launch(d2)
	waitReady(t, a2, "rebooted")
	a2.Close()
	a3 := containerAgent(t, cc, dir, "boot-2")
	defer func() {
		a3.StopAll(time.Second)
		a3.Close()
	}()
	if containerExists(cc, containerName("rebooted")) {
		t.Error("after a reboot, the old boot's container is still there")
	}
}

// TestContainerStartErrors: an image that cannot be pulled ends the
// allocation at once with 125 and a reason naming the image, in the
// report and in stderr, not a retry loop; with the pull policy never,
// an image missing here says so.
func TestContainerStartErrors(t *testing.T) {
	cc := podmanConfig(t)
	a := containerAgent(t, cc, t.TempDir(), "")
	defer a.Close()
	d := imageAlloc("nopull", "true")
	d.Workload.Image = "127.0.0.1:1/berth-test/absent:1"
	p := a.launch(d)
	waitFor(t, "the pull failure", 60*time.Second, p.exited)
	got := p.actual()
	if got.ExitCode != 125 || !strings.Contains(got.StartError, "pulling image 127.0.0.1:1/berth-test/absent:1 failed") {
		t.Errorf("%+v: want exit 125 and the image's pull failure", got)
	}
	if errs := readLog2(a, "nopull", "stderr.log"); !strings.Contains(errs, "pulling image 127.0.0.1:1/berth-test/absent:1") {
		t.Errorf("stderr log does not say why: %q", errs)
	}

	cc.Pull = "never"
	b := containerAgent(t, cc, t.TempDir(), "")
	defer b.Close()
	d = imageAlloc("never", "true")
	d.Workload.Image = "localhost/berth-test/absent:1"
	p = b.launch(d)
	waitFor(t, "the missing image", 60*time.Second, p.exited)
	if got := p.actual(); got.ExitCode != 125 || !strings.Contains(got.StartError, "not on this node and the agent's pull policy is never") {
		t.Errorf("%+v: want exit 125, image not on this node", got)
	}
}

// TestContainerOOMKill: a container that outgrows its memory limit is
// killed by the kernel, and the exit says so.
func TestContainerOOMKill(t *testing.T) {
	cc := podmanConfig(t)
	a := containerAgent(t, cc, t.TempDir(), "")
	defer a.Close()
	d := imageAlloc("oom", `sleep 0.5; x=$(head -c 200000000 /dev/zero | tr "\0" a); echo survived`)
	d.MemoryMiB = 16
	p := a.launch(d)
	waitFor(t, "the OOM kill", 60*time.Second, p.exited)
	got := p.actual()
	if !got.OOMKilled || got.ExitCode != 137 || got.Killed {
		t.Fatalf("%+v: want exit 137 from the OOM killer, reported as such", got)
	}
	if !strings.Contains(readLog2(a, "oom", "stderr.log"), "killed for memory") {
		t.Error("stderr log does not say the container was killed for memory")
	}
}

// TestContainerReadiness: a replica's readiness command runs inside its
// container (the file it checks exists only there).
func TestContainerReadiness(t *testing.T) {
	cc := podmanConfig(t)
	a := containerAgent(t, cc, t.TempDir(), "")
	defer a.Close()
	d := imageAlloc("r1", `trap 'exit 0' TERM; sleep 1; touch /tmp/serving; while :; do sleep 0.1; done`)
	d.OwnerKind, d.OwnerID, d.Workload.Readiness = model.OwnerInference, "dep-1", &model.Readiness{Command: []string{"test", "-f", "/tmp/serving"}}
	p := a.launch(d)
	if _, err := os.Stat("/tmp/serving"); err == nil {
		t.Fatal("/tmp/serving exists on the host: the test cannot tell where the check ran")
	}
	defer func() {
		p.stop(time.Now().Add(5*time.Second), "test")
		<-p.done
	}()
	waitFor(t, "the replica ready", 30*time.Second, func() bool { return p.actual().Ready })
}

// TestContainerJobRequeuesFromItsCheckpoint: through the real server, a
// preemptible job that names an image runs in a container; a higher
// ranked job preempts it; SIGTERM reaches it inside the container, it
// writes a checkpoint to its (mounted) checkpoint directory and exits;
// the job is requeued from that checkpoint and its second run, in a new
// container, is told the restore point. `berth job logs` reads the
// container's output like any job's.
func TestContainerJobRequeuesFromItsCheckpoint(t *testing.T) {
	cc := podmanConfig(t)
	f := newFleetWith(t, func(c *server.Config) { c.Control.Sched.Storage.MinDeadline = 5 * time.Second })
	f.ctr = &cc
	n := f.startAgent("c-1", "")
	defer ctrtest.Remove(cc.Podman, n.stateDir)
	ck := t.TempDir()
	script := `echo "restore=${BERTH_RESTORE:-none}"; ` +
		`trap 'echo "$BERTH_CHECKPOINT_DIR/step-9" > "$BERTH_ALLOC_DIR/checkpoint"; echo step-9 > "$BERTH_CHECKPOINT_DIR/step-9"; exit 0' TERM; ` +
		`echo ready; while :; do sleep 0.1; done`
	acc, err := f.api.SubmitJob(t.Context(), api.JobRequest{Name: "boxed", Team: "t", GPUs: 8, Topology: "node", Preemptible: true,
		Checkpoint: &api.CheckpointRequest{Path: ck, Bytes: 1 << 20}, Image: testImage, Command: []string{"sh", "-c", script}}, "")
	if err != nil {
		t.Fatal(err)
	}
	first := f.running(n, acc.JobID)
	waitFor(t, "the job in container "+containerName(first), 30*time.Second, func() bool { return containerExists(cc, containerName(first)) })
	// Preempted before its trap is set, it could not checkpoint.
	waitFor(t, "the job's trap set", 30*time.Second, func() bool { return strings.Contains(readLog(t, n, first, "stdout.log"), "ready") })
	urgent := f.submit(api.JobRequest{Name: "urgent", GPUs: 8, Priority: 1000}, "train", "-steps", "1000000", "-step-time", "50ms")
	eventually(t, "the boxed job requeued from its checkpoint", func() error {
		j := f.job(acc.JobID)
		if j.Run().Restore != filepath.Join(ck, "step-9") {
			return fmt.Errorf("restore %q, history %v", j.Run().Restore, j.History)
		}
		return nil
	})
	if b, _ := os.ReadFile(filepath.Join(ck, "step-9")); string(b) != "step-9\n" {
		t.Errorf("the checkpoint written inside the container is not on the host: %q", b)
	}
	if _, err := f.api.CancelJob(t.Context(), urgent); err != nil {
		t.Fatal(err)
	}
	var second string
	eventually(t, "the second run", func() error {
		j := f.job(acc.JobID)
		if j.State != model.JobRunning || len(j.Allocations) == 0 || j.Allocations[0].ID == first {
			return fmt.Errorf("state %s", j.State)
		}
		second = j.Allocations[0].ID
		return nil
	})
	eventually(t, "the second run told its restore point, read through the API", func() error {
		var b bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.api.Stream(ctx, "/v1/jobs/"+acc.JobID+"/logs", &b); err != nil {
			return err
		}
		if !strings.Contains(b.String(), "restore="+filepath.Join(ck, "step-9")) {
			return fmt.Errorf("job logs: %q", b.String())
		}
		return nil
	})
	waitFor(t, "the second run in container "+containerName(second), 30*time.Second, func() bool { return containerExists(cc, containerName(second)) })
	if _, err := f.api.CancelJob(t.Context(), acc.JobID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cancelled job's container removed", func() error {
		if containerExists(cc, containerName(second)) {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// TestContainerDeploymentReady: an inference deployment whose replicas
// name an image serves from a container: busybox's httpd on the node's
// network, its address in $BERTH_ALLOC_DIR/addr, the HTTP readiness
// check asked of it, and the deployment counts the replica ready only
// then (what relocation's make-before-break waits for).
func TestContainerDeploymentReady(t *testing.T) {
	cc := podmanConfig(t)
	f := newFleet(t)
	f.ctr = &cc
	n := f.startAgent("c-1", "")
	defer ctrtest.Remove(cc.Podman, n.stateDir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	script := `trap 'exit 0' TERM; sleep 1; mkdir -p /www; echo ok > /www/healthz; ` +
		`httpd -p "$ADDR" -h /www; echo "$ADDR" > "$BERTH_ALLOC_DIR/addr"; while :; do sleep 0.1; done`
	deployBoxed(t, f, "boxed", script, map[string]string{"ADDR": addr})
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the replica's server: %d", resp.StatusCode)
	}
}

// TestContainerMountsFenced: a job's checkpoint path is its own to
// choose, and it is bound into its container read-write: the root, a
// system directory, the agent's state (or a directory holding it), a
// symlink to any of them and a relative path are refused, each a start
// failure that says which path and why.
func TestContainerMountsFenced(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	a := containerAgent(t, ContainerConfig{Podman: "podman", Pull: "missing", CDIDirs: []string{}}, state, "")
	defer a.Close()
	link := filepath.Join(dir, "innocent")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ path, want string }{
		{"/", "the root"},
		{"/etc/berth", "/etc is a system directory"},
		{"/proc/self", "/proc is a system directory"},
		{link, "/etc is a system directory"},
		{dir, "agent's state directory"},
		{filepath.Join(state, "allocs", "x"), "agent's state directory"},
		{"relative/ck", "must be an absolute path"},
	} {
		id := fmt.Sprintf("m%d", i)
		d := imageAlloc(id, "true")
		d.CheckpointDir = c.path
		p := a.launch(d)
		<-p.done
		if got := p.actual(); got.ExitCode != 126 || !strings.Contains(got.StartError, c.want) {
			t.Errorf("checkpoint dir %s: %+v: want exit 126 and %q", c.path, got, c.want)
		}
	}
	if _, err := os.Stat("/etc/berth"); err == nil {
		t.Error("the refused /etc/berth was created on the host")
	}
}

// TestContainerPullFailureFailsTheJob: through the server, a job whose
// image cannot be pulled fails once, with the image and the reason in
// its history: no retry loop.
func TestContainerPullFailureFailsTheJob(t *testing.T) {
	cc := podmanConfig(t)
	f := newFleet(t)
	f.ctr = &cc
	n := f.startAgent("c-1", "")
	defer ctrtest.Remove(cc.Podman, n.stateDir)
	acc, err := f.api.SubmitJob(t.Context(), api.JobRequest{Name: "nopull", Team: "t", GPUs: 1, Topology: "node",
		Image: "127.0.0.1:1/berth-test/absent:1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	j := f.waitState(acc.JobID, model.JobFailed)
	if !slices.ContainsFunc(j.History, func(e model.Event) bool {
		return e.Event == "start_failed" && strings.Contains(e.Detail, "pulling image 127.0.0.1:1/berth-test/absent:1 failed")
	}) {
		t.Errorf("history does not say the pull failed: %v", j.History)
	}
	if len(j.Run().Ran) != 1 {
		t.Errorf("ran %d times, want once", len(j.Run().Ran))
	}
}

// TestContainerReplicaRelocates: relocation works unchanged for images.
// Two 8-GPU nodes each hold one boxed replica (of two deployments) and
// nothing else; an 8-GPU job fits on neither until defragmentation moves
// one replica: its new container starts on the other node, passes its
// HTTP check there, and only then is the old one stopped (make before
// break); the job then runs. Each copy finds its own port: the fake
// nodes share this host's network.
func TestContainerReplicaRelocates(t *testing.T) {
	cc := podmanConfig(t)
	f := newFleet(t)
	f.ctr = &cc
	na, nb := f.startAgent("c-a", ""), f.startAgent("c-b", "")
	defer ctrtest.Remove(cc.Podman, na.stateDir)
	defer ctrtest.Remove(cc.Podman, nb.stateDir)
	script := `trap 'exit 0' TERM; mkdir -p /www; echo ok > /www/healthz; P=$((20000 + RANDOM % 20000)); ` +
		`until httpd -p 127.0.0.1:$P -h /www; do P=$((20000 + RANDOM % 20000)); done; ` +
		`echo 127.0.0.1:$P > "$BERTH_ALLOC_DIR/addr"; while :; do sleep 0.1; done`
	// A 7-GPU filler on a node, a replica beside it (best fit), twice:
	// one replica on each node once the fillers go.
	fill := func() string {
		return f.submit(api.JobRequest{Name: "filler", GPUs: 7}, "train", "-steps", "1000000", "-step-time", "50ms")
	}
	f1 := fill()
	f.waitState(f1, model.JobRunning)
	deployBoxed(t, f, "boxed-1", script, nil)
	f2 := fill()
	f.waitState(f2, model.JobRunning)
	deployBoxed(t, f, "boxed-2", script, nil)
	for _, j := range []string{f1, f2} {
		if _, err := f.api.CancelJob(t.Context(), j); err != nil {
			t.Fatal(err)
		}
		f.waitState(j, model.JobCancelled)
	}
	containers := func(ra *runningAgent) int {
		out, _ := exec.Command(cc.Podman, cc.global([]string{"ps", "--quiet", "--filter", "label=berth.state=" + ra.stateDir})...).Output()
		return len(strings.Fields(string(out)))
	}
	if a, b := containers(na), containers(nb); a != 1 || b != 1 {
		t.Fatalf("replicas before: %d on c-a, %d on c-b; want one each", a, b)
	}
	big := f.submit(api.JobRequest{Name: "whole-node", GPUs: 8}, "train", "-steps", "1000000", "-step-time", "50ms")
	eventually(t, "the whole-node job running after a replica moved", func() error {
		if j := f.job(big); j.State != model.JobRunning {
			why := ""
			if j.PendingReason != nil {
				why = j.PendingReason.Message
			}
			return fmt.Errorf("%s: %s", j.State, why)
		}
		return nil
	})
	if a, b := containers(na), containers(nb); a+b != 2 || (a != 0 && b != 0) {
		t.Errorf("replicas after: %d on c-a, %d on c-b; want both on one node", a, b)
	}
	for _, name := range []string{"boxed-1", "boxed-2"} {
		if d := deployment(t, f, name); d.Ready != 1 {
			t.Errorf("%s after the move: ready %d", name, d.Ready)
		}
	}
	if _, err := f.api.CancelJob(t.Context(), big); err != nil {
		t.Fatal(err)
	}
}

// deployBoxed creates a one-replica deployment of a 1-GPU image running
// script, with an HTTP readiness check, and waits until it serves.
func deployBoxed(t *testing.T, f *fleet, name, script string, env map[string]string) {
	t.Helper()
	req := api.DeploymentRequest{Name: name, Model: "m", Team: "t", MinReplicas: 1, MaxReplicas: 1,
		ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, Readiness: &model.Readiness{HTTP: "/healthz"},
		Image: testImage, Command: []string{"sh", "-c", script}, Env: env}
	if err := f.api.Do(context.Background(), "POST", "/v1/deployments", req, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, name+" ready", func() error {
		if d := deployment(t, f, name); d.Ready != 1 {
			return fmt.Errorf("ready %d, actual %d", d.Ready, d.Actual)
		}
		return nil
	})
}
