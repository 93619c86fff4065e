package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// The agent half of the fault suite: `berth agent` as a real process,
// killed the way agents die (kill -9), restarted, replaced.

// single is one `berth server`: the agent faults need no quorum.
func single(t *testing.T) *cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c := &cluster{t: t}
		m := &member{name: "s0", api: freePort(t), peer: freePort(t), client: freePort(t), dir: filepath.Join(t.TempDir(), "s0")}
		c.members = []*member{m}
		c.start(m, "")
		t.Cleanup(func() { c.kill(m) })
		var err error
		if c.admin, err = waitAdmin(m, 30*time.Second); err == nil {
			return c
		}
		c.kill(m)
		if attempt == 3 {
			t.Fatalf("server: %v", err)
		}
	}
}

// waitAdmin waits for the bootstrap admin token a new server writes in
// its data dir.
func waitAdmin(m *member, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(m.dir, "admin.token")); err == nil && len(b) > 0 {
			tok := strings.TrimSpace(string(b))
			if st, _, _, err := request(m.api, tok, http.MethodGet, "/v1/nodes", nil); err == nil && st == 200 {
				return tok, nil
			}
		}
		select {
		case <-m.done:
			return "", fmt.Errorf("server exited; see %s", filepath.Join(m.dir, "server.log"))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("no admin token in %s within %v", m.dir, limit)
}

// agentProc is one `berth agent` process with fake GPUs.
type agentProc struct {
	id, dir, token string
	cmd            *exec.Cmd
	done           chan struct{}
}

// startAgent runs `berth agent` for node id with its state in dir; boot
// stands in for the kernel's boot id ("" for the real one).
func (c *cluster) startAgent(id, dir, boot string) *agentProc {
	c.t.Helper()
	p := &agentProc{id: id, dir: dir, token: c.tokenFor("agent:" + id)}
	var servers []string
	for _, m := range c.members {
		servers = append(servers, m.api)
	}
	os.MkdirAll(dir, 0o700)
	log, err := os.OpenFile(filepath.Join(filepath.Dir(dir), id+"-agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	args := []string{"agent", "--server", strings.Join(servers, ","), "--node-id", id, "--pod", "p1", "--state-dir", dir,
		"--fake-gpus", "8", "--heartbeat-interval", "200ms", "--cpu-milli", "64000", "--memory-mib", "524288",
		"--orphan-grace", "3s", "--cgroups", "off", "--log-json"}
	if boot != "" {
		args = append(args, "--boot-id", boot)
	}
	p.cmd = exec.Command(berth, append(args, c.agentArgs...)...)
	p.cmd.Env = append(os.Environ(), "BERTH_TOKEN="+p.token)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	// Killed with the test process, however it ends.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() {
		p.cmd.Wait()
		log.Close()
		close(p.done)
	}()
	logPath := log.Name()
	c.t.Cleanup(func() {
		p.kill()
		if c.t.Failed() {
			c.t.Logf("--- agent %s log tail ---\n%s", id, tail(logPath, 30))
		}
	})
	return p
}

// tail is the last n lines of a log file, audit lines left out.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, `"msg":"audit"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// kill is kill -9 of the agent alone; what it ran is left as it is.
func (p *agentProc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
}

// stopWorkloads ends every process an agent's state dir ran (the test's
// cleanup: the agent that owned them is gone).
func stopWorkloads(t *testing.T, dir string) {
	t.Cleanup(func() {
		pids, _ := filepath.Glob(filepath.Join(dir, "allocs", "*", "pid"))
		for _, f := range pids {
			b, _ := os.ReadFile(f)
			if pid, err := strconv.Atoi(strings.Fields(string(b) + " 0")[0]); err == nil && pid > 1 {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
}

func (c *cluster) node(id string) (api.Node, error) {
	st, body, _, err := c.client(c.admin).do(http.MethodGet, "/v1/nodes/"+id, nil)
	if err != nil || st != 200 {
		return api.Node{}, fmt.Errorf("%d %s %v", st, body, err)
	}
	var n api.Node
	return n, json.Unmarshal(body, &n)
}

// waitEpoch waits until the table has the node in the given epoch.
func (c *cluster) waitEpoch(id string, epoch uint64) {
	c.t.Helper()
	c.eventually("node "+id+" in epoch "+strconv.FormatUint(epoch, 10), 30*time.Second, func() error {
		n, err := c.node(id)
		if err != nil {
			return err
		}
		if n.BootEpoch != epoch || n.Health != model.HealthHealthy {
			return fmt.Errorf("epoch %d, %s", n.BootEpoch, n.Health)
		}
		return nil
	})
}

// runningOn waits for a job to run and returns its allocation and the
// pid of its group leader (the shim) from the agent's state dir.
func (c *cluster) runningOn(dir, job string) (model.Allocation, int) {
	c.t.Helper()
	var a model.Allocation
	var pid int
	c.eventually("job "+job+" running", 30*time.Second, func() error {
		j, err := c.job(job)
		if err != nil {
			return err
		}
		if j.State != model.JobRunning || len(j.Allocations) == 0 {
			return fmt.Errorf("%s", j.State)
		}
		a = j.Allocations[0]
		b, err := os.ReadFile(filepath.Join(dir, "allocs", a.ID, "pid"))
		if err != nil {
			return err
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err
	})
	return a, pid
}

func shellJob(name, script string) api.JobRequest {
	return api.JobRequest{Name: name, Team: "t", GPUs: 2, Topology: "node", Command: []string{"/bin/sh", "-c", script}}
}

// ticks counts the "tick N" lines of a log and returns the last N.
func ticks(t *testing.T, path string) (lines, last int) {
	t.Helper()
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if n, err := strconv.Atoi(strings.TrimPrefix(l, "tick ")); err == nil && strings.HasPrefix(l, "tick ") {
			lines, last = lines+1, n
		}
	}
	return lines, last
}

// TestFaultAgentKill9KeepsWorkloads: kill -9 of the agent leaves every
// workload running, a chatty one (writing its log every 100 ms, the case
// a pipe kills with SIGPIPE) and a silent one; the restarted agent
// adopts both under the same allocations, nothing is requeued, and the
// chatty log holds every line from before, during and after.
func TestFaultAgentKill9KeepsWorkloads(t *testing.T) {
	c := single(t)
	dir := filepath.Join(t.TempDir(), "n1")
	stopWorkloads(t, dir)
	ag := c.startAgent("n1", dir, "")
	c.waitEpoch("n1", 1)
	chatty, err := c.submit(shellJob("chatty", `i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.1; done`), "chatty", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := c.submit(shellJob("silent", "exec sleep 1000"), "silent", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ca, cpid := c.runningOn(dir, chatty.JobID)
	sa, spid := c.runningOn(dir, silent.JobID)
	chattyLog := filepath.Join(dir, "allocs", ca.ID, "stdout.log")
	c.eventually("chatty writes", 10*time.Second, func() error {
		if n, _ := ticks(t, chattyLog); n < 5 {
			return fmt.Errorf("%d ticks", n)
		}
		return nil
	})

	ag.kill()
	_, before := ticks(t, chattyLog)
	time.Sleep(3 * time.Second) // 30 writes with no agent
	for name, pid := range map[string]int{"chatty": cpid, "silent": spid} {
		if !alive(pid) {
			t.Fatalf("%s (pid %d) died with the agent", name, pid)
		}
	}
	_, during := ticks(t, chattyLog)
	if during < before+10 {
		t.Errorf("chatty logged %d lines while the agent was dead, want about 30", during-before)
	}

	c.startAgent("n1", dir, "")
	c.waitEpoch("n1", 1)
	time.Sleep(2 * time.Second) // several heartbeats under the new agent
	for name, want := range map[string]model.Allocation{chatty.JobID: ca, silent.JobID: sa} {
		j, err := c.job(name)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != model.JobRunning || len(j.Allocations) != 1 || j.Allocations[0].ID != want.ID {
			t.Errorf("job %s after the agent's restart: %s %v, want allocation %s running", j.Name, j.State, j.Allocations, want.ID)
		}
		if slices.ContainsFunc(j.History, func(e model.Event) bool { return e.Event == "requeued" }) {
			t.Errorf("job %s was requeued: %v", j.Name, j.History)
		}
	}
	if !alive(cpid) || !alive(spid) {
		t.Fatal("a workload died when the agent came back")
	}
	lines, last := ticks(t, chattyLog)
	if lines != last || last < during+10 {
		t.Errorf("chatty's log: %d lines up to tick %d (tick %d when the agent came back): want every line, still growing", lines, last, during)
	}
	// Adopted work is the agent's again: a cancel stops it.
	if st, body, _, err := c.client(c.admin).do(http.MethodDelete, "/v1/jobs/"+silent.JobID, nil); err != nil || st >= 300 {
		t.Fatalf("cancel: %d %s %v", st, body, err)
	}
	c.eventually("adopted silent job stopped on cancel", 20*time.Second, func() error {
		if alive(spid) {
			return fmt.Errorf("pid %d alive", spid)
		}
		return nil
	})
}

// TestFaultNodeReplacedUnderSameName: a wiped state dir (or a new machine
// under an old name) is a new node UUID: every allocation the node had is
// invalidated (100%) with node_replaced, its jobs are requeued from their
// checkpoint, and what the old incarnation left running is stopped.
func TestFaultNodeReplacedUnderSameName(t *testing.T) {
	c := single(t)
	dir := filepath.Join(t.TempDir(), "n1")
	stopWorkloads(t, dir)
	ag := c.startAgent("n1", dir, "")
	c.waitEpoch("n1", 1)
	var jobs []string
	pids := map[string]int{}
	for i := range 4 {
		name := fmt.Sprintf("on-old-%d", i)
		acc, err := c.submit(longJob(name, 2), name, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, acc.JobID)
	}
	old := map[string]string{}
	for _, j := range jobs {
		a, pid := c.runningOn(dir, j)
		old[j], pids[j] = a.ID, pid
	}
	ag.kill()
	// The replacement: same name, nothing of the old state dir. The old
	// processes run on, as they would on hardware nobody powered off.
	wiped := dir + ".old"
	if err := os.Rename(dir, wiped); err != nil {
		t.Fatal(err)
	}
	stopWorkloads(t, wiped)
	c.startAgent("n1", dir, "")
	c.waitRequeued(jobs, "node_replaced", func(j api.Job) error {
		if len(j.Allocations) == 0 || j.Allocations[0].ID == old[j.ID] {
			return fmt.Errorf("job %s still on %v", j.Name, j.Allocations)
		}
		return nil
	})
	c.identityChanged("n1", "node_replaced", len(jobs))
	for j, pid := range pids {
		if alive(pid) {
			t.Errorf("job %s's old process %d still runs on the replaced node", j, pid)
		}
	}
}

// TestFaultNodeRebootedRequeuesFromCheckpoint: the same state dir in a
// new boot is a new epoch: every allocation is invalidated as
// node_rebooted and each job goes back from the checkpoint it wrote.
func TestFaultNodeRebootedRequeuesFromCheckpoint(t *testing.T) {
	c := single(t)
	dir := filepath.Join(t.TempDir(), "n1")
	stopWorkloads(t, dir)
	ag := c.startAgent("n1", dir, "boot-a")
	c.waitEpoch("n1", 1)
	var jobs []string
	for i := range 3 {
		req := longJob(fmt.Sprintf("ckpt-%d", i), 2)
		req.Command = []string{berth, "workload", "train", "--steps", "1000000", "--step-time", "20ms", "--checkpoint-every", "10"}
		req.Checkpoint = &api.CheckpointRequest{Path: filepath.Join(t.TempDir(), "ck"), Bytes: 1 << 20}
		acc, err := c.submit(req, req.Name, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, acc.JobID)
	}
	for _, j := range jobs {
		c.runningOn(dir, j)
	}
	c.eventually("every job has recorded a checkpoint", 30*time.Second, func() error {
		for _, id := range jobs {
			if j, err := c.job(id); err != nil || j.Run().Restore == "" {
				return fmt.Errorf("job %s: no restore point (%v)", id, err)
			}
		}
		return nil
	})
	ag.kill()
	c.startAgent("n1", dir, "boot-b")
	c.waitEpoch("n1", 2)
	c.waitRequeued(jobs, "node_rebooted", func(j api.Job) error {
		if j.Run().Restore == "" {
			return fmt.Errorf("job %s requeued without its checkpoint", j.Name)
		}
		return nil
	})
	c.identityChanged("n1", "node_rebooted", len(jobs))
}

// waitRequeued waits until every job has been requeued for reason and
// runs again, each passing check too.
func (c *cluster) waitRequeued(jobs []string, reason string, check func(api.Job) error) {
	c.t.Helper()
	c.eventually("every job requeued as "+reason+" and running again", 30*time.Second, func() error {
		for _, id := range jobs {
			j, err := c.job(id)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(j.History, func(e model.Event) bool { return e.Event == "requeued" && e.Detail == reason }) {
				return fmt.Errorf("job %s: no %s requeue in %v", j.Name, reason, j.History)
			}
			if j.State != model.JobRunning {
				return fmt.Errorf("job %s %s", j.Name, j.State)
			}
			if err := check(j); err != nil {
				return err
			}
		}
		return nil
	})
}

// identityChanged checks that the node's last identity change is reason
// and invalidated n allocations (all it had).
func (c *cluster) identityChanged(node, reason string, n int) {
	c.t.Helper()
	nd, err := c.node(node)
	if err != nil {
		c.t.Fatal(err)
	}
	if ic := nd.IdentityChange; ic == nil || ic.Reason != reason || ic.Invalidated != n {
		c.t.Errorf("identity change %+v, want %s invalidating %d (100%%)", ic, reason, n)
	}
}
