package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/server"
	"github.com/berthsched/berth/internal/workload"
)

func TestStartValidates(t *testing.T) {
	good := func() Config {
		return Config{DataDir: filepath.Join(t.TempDir(), "never"), Listen: "127.0.0.1:0", Nodes: 4, Pods: 2, GPUsPerNode: 8}
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		flag string
	}{
		{"no nodes", func(c *Config) { c.Nodes = 0 }, "--nodes"},
		{"too many nodes", func(c *Config) { c.Nodes, c.Pods = 4097, 1 }, "--nodes"},
		{"no pods", func(c *Config) { c.Pods = 0 }, "--pods"},
		{"more pods than nodes", func(c *Config) { c.Pods = 5 }, "--pods"},
		{"no GPUs", func(c *Config) { c.GPUsPerNode = 0 }, "--gpus-per-node"},
		{"too many GPUs", func(c *Config) { c.GPUsPerNode = model.MaxGPUsPerNode + 1 }, "--gpus-per-node"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "--data-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good()
			tc.edit(&cfg)
			s, err := Start(context.Background(), cfg)
			if err == nil {
				s.Stop()
				t.Fatalf("Start(%+v) succeeded; want an error naming %s", cfg, tc.flag)
			}
			if !strings.HasPrefix(err.Error(), tc.flag+":") {
				t.Errorf("error %q does not lead with the flag %s", err, tc.flag)
			}
			if cfg.DataDir != "" {
				if _, err := os.Stat(cfg.DataDir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a rejected config touched --data-dir %s (stat: %v): validation must come first", cfg.DataDir, err)
				}
			}
		})
	}
	// The boundaries themselves are valid.
	for _, cfg := range []Config{
		{Nodes: 1, Pods: 1, GPUsPerNode: model.MaxGPUsPerNode, DataDir: "x"},
		{Nodes: 3, Pods: 3, GPUsPerNode: 1, DataDir: "x"},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", cfg, err)
		}
	}
}

// eventually polls f until it returns nil, failing after limit with the
// last error.
func eventually(t *testing.T, limit time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startStack starts a stack and stops it at cleanup unless the test
// already did; the returned stop is safe to call more than once.
func startStack(t *testing.T, cfg Config) (*Stack, func()) {
	t.Helper()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			done := make(chan error, 1)
			go func() { done <- s.Stop() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Stop: %v", err)
				}
			case <-time.After(2 * time.Minute):
				t.Errorf("Stop did not return within 2m")
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

func listJobs(ctx context.Context, c *client.Client) ([]api.Job, error) {
	var l api.JobList
	err := c.Do(ctx, http.MethodGet, "/v1/jobs", nil, &l)
	return l.Jobs, err
}

func named(jobs []api.Job, name string) []api.Job {
	var out []api.Job
	for _, j := range jobs {
		if j.Name == name {
			out = append(out, j)
		}
	}
	return out
}

func listNodes(ctx context.Context, c *client.Client) (map[string]api.Node, error) {
	var l api.NodeList
	if err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil, &l); err != nil {
		return nil, err
	}
	out := map[string]api.Node{}
	for _, n := range l.Nodes {
		out[n.ID] = n
	}
	return out, nil
}

func deployment(ctx context.Context, c *client.Client, name string) (api.Deployment, error) {
	var d api.Deployment
	err := c.Do(ctx, http.MethodGet, "/v1/deployments/"+url.PathEscape(name), nil, &d)
	return d, err
}

// agentAlloc is what the stack's agent on node reports for alloc.
func (s *Stack) agentAlloc(node, alloc string) (model.ActualAlloc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.agents {
		if n.id != node {
			continue
		}
		for _, a := range n.Allocations() {
			if a.ID == alloc {
				return a, true
			}
		}
	}
	return model.ActualAlloc{}, false
}

func (s *Stack) epochs() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]uint64{}
	for _, n := range s.agents {
		out[n.id] = n.Epoch()
	}
	return out
}

func allocDir(dataDir, node, alloc string) string {
	return filepath.Join(dataDir, "agents", node, "allocs", alloc)
}

// proc is a process identity: pid and start time, as the agent's pid file
// records it.
type proc struct {
	pid   int
	start uint64
}

// pidFiles reads every allocation's pid file under the stack's agents.
func pidFiles(t *testing.T, dataDir string) map[string]proc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "agents", "*", "allocs", "*", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]proc{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		var p proc
		if _, err := fmt.Sscan(string(b), &p.pid, &p.start); err != nil || p.pid <= 0 {
			t.Fatalf("pid file %s holds %q", f, b)
		}
		rel, _ := filepath.Rel(dataDir, filepath.Dir(f))
		out[rel] = p
	}
	return out
}

// stat reads the state and start time from /proc/<pid>/stat.
func stat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, 0, fmt.Errorf("malformed stat %q", s)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("short stat %q", s)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, err
}

// alive reports whether the process p (not a later one reusing its pid)
// still runs: a zombie does not count.
func alive(p proc) (bool, string) {
	if err := syscall.Kill(p.pid, 0); errors.Is(err, syscall.ESRCH) {
		return false, ""
	}
	state, start, err := stat(p.pid)
	switch {
	case err != nil:
		return false, ""
	case start != p.start:
		return false, "" // the pid was reused
	case state == 'Z' || state == 'X':
		return false, ""
	}
	return true, fmt.Sprintf("pid %d is in state %c", p.pid, state)
}

var stepLine = regexp.MustCompile(`(?m)^step [1-9][0-9]*/3600$`)

// TestDemoRunsRealWorkloads runs the demo mix with this test binary as
// berth (see TestMain): the scheduler places the mix, the agents run real
// training and inference processes, the autoscaler scales through the
// API, and Stop leaves no workload behind.
func TestDemoRunsRealWorkloads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, stop := startStack(t, Config{DataDir: dir, Listen: "127.0.0.1:0", Nodes: 8, Pods: 2, GPUsPerNode: 8,
		Interval: 200 * time.Millisecond, Berth: os.Args[0]})
	if err := s.RunDemo(ctx, Demo{Day: 20 * time.Second, SweepEvery: 5 * time.Second}); err != nil {
		t.Fatalf("RunDemo: %v", err)
	}
	httpc := &http.Client{Timeout: 5 * time.Second}

	chatDesired := map[int]bool{}
	var pretrain api.Job
	replies := map[string]workload.Reply{} // deployment → a replica's answer
	eventually(t, 60*time.Second, "the demo mix running as real processes", func() error {
		// Sample the autoscaler first: every poll counts, even one that
		// fails further down.
		chat, err := deployment(ctx, s.API, "chat")
		if err != nil {
			return err
		}
		if chat.Desired < chat.MinReplicas || chat.Desired > chat.MaxReplicas {
			t.Fatalf("the autoscaler set chat to %d, outside [%d, %d]", chat.Desired, chat.MinReplicas, chat.MaxReplicas)
		}
		chatDesired[chat.Desired] = true

		jobs, err := listJobs(ctx, s.API)
		if err != nil {
			return err
		}
		pt := named(jobs, "pretrain-32")
		if len(pt) != 1 {
			return fmt.Errorf("%d jobs named pretrain-32", len(pt))
		}
		if pt[0].State != model.JobRunning {
			return fmt.Errorf("pretrain-32 is %s", pt[0].State)
		}
		if ft := named(jobs, "finetune-8"); len(ft) != 1 || ft[0].State != model.JobRunning {
			return fmt.Errorf("finetune-8: %+v", ft)
		}
		sweeps := 0
		for _, j := range jobs {
			if strings.HasPrefix(j.Name, "sweep-") {
				sweeps++
			}
		}
		if sweeps < 8 {
			return fmt.Errorf("%d sweep jobs submitted", sweeps)
		}
		for _, name := range []string{"chat", "embed"} {
			d, err := deployment(ctx, s.API, name)
			if err != nil {
				return err
			}
			if d.Actual < d.MinReplicas {
				return fmt.Errorf("%s has %d replicas, min %d", name, d.Actual, d.MinReplicas)
			}
		}

		// The gang: 32 GPUs, all in one pod, each member a real trainer
		// stepping on its node.
		pretrain, err = s.API.Job(ctx, pt[0].ID)
		if err != nil {
			return err
		}
		nodes, err := listNodes(ctx, s.API)
		if err != nil {
			return err
		}
		gpus, pods := 0, map[string]bool{}
		for _, a := range pretrain.Allocations {
			gpus += a.GPUs.Count()
			n, ok := nodes[a.NodeID]
			if !ok {
				return fmt.Errorf("allocation %s is on %s, which GET /v1/nodes does not list", a.ID, a.NodeID)
			}
			pods[n.Pod] = true
		}
		if gpus != 32 || len(pods) != 1 {
			return fmt.Errorf("pretrain-32 holds %d GPUs in pods %v", gpus, pods)
		}
		for _, a := range pretrain.Allocations {
			if act, ok := s.agentAlloc(a.NodeID, a.ID); !ok || act.State != model.ActualRunning {
				return fmt.Errorf("agent %s reports allocation %s as %+v (found %v)", a.NodeID, a.ID, act, ok)
			}
			b, err := os.ReadFile(filepath.Join(allocDir(dir, a.NodeID, a.ID), "stdout.log"))
			if err != nil {
				return err
			}
			if !stepLine.Match(b) {
				return fmt.Errorf("allocation %s has not stepped yet: %q", a.ID, b)
			}
		}

		// Inference: a replica of each deployment answers on the address
		// it wrote into its allocation directory.
		var dash server.Dashboard
		if err := s.API.Do(ctx, http.MethodGet, "/v1/dashboard", nil, &dash); err != nil {
			return err
		}
		for _, pod := range dash.Pods {
			for _, n := range pod.Nodes {
				for _, c := range n.GPUs {
					if c.Kind != "inference" || c.Stopping || replies[c.Owner].Alloc != "" {
						continue
					}
					addr, err := os.ReadFile(filepath.Join(allocDir(dir, n.ID, c.Alloc), "addr"))
					if err != nil {
						continue // not listening yet
					}
					resp, err := httpc.Get("http://" + strings.TrimSpace(string(addr)) + "/")
					if err != nil {
						return fmt.Errorf("replica %s of %s: %v", c.Alloc, c.Owner, err)
					}
					var r workload.Reply
					err = json.NewDecoder(resp.Body).Decode(&r)
					resp.Body.Close()
					if err != nil {
						return fmt.Errorf("replica %s of %s answers no JSON: %v", c.Alloc, c.Owner, err)
					}
					if r.Deployment != c.Owner || r.Alloc != c.Alloc {
						t.Fatalf("the replica at %s (allocation %s of %s on %s) says it is %+v", addr, c.Alloc, c.Owner, n.ID, r)
					}
					replies[c.Owner] = r
				}
			}
		}
		for _, name := range []string{"chat", "embed"} {
			if replies[name].Alloc == "" {
				return fmt.Errorf("no replica of %s answered yet", name)
			}
		}
		if len(chatDesired) < 2 {
			return fmt.Errorf("chat's desired replicas have only been %v", chatDesired)
		}
		return nil
	})
	t.Logf("chat desired replicas seen: %v; replicas answered: %+v", chatDesired, replies)

	running := pidFiles(t, dir)
	for _, a := range pretrain.Allocations {
		rel := filepath.Join("agents", a.NodeID, "allocs", a.ID)
		if _, ok := running[rel]; !ok {
			t.Fatalf("pretrain-32's allocation %s runs but has no pid file (pid files: %v)", rel, running)
		}
	}

	stop()

	var survivors []string
	for rel, p := range running {
		if ok, why := alive(p); ok {
			survivors = append(survivors, rel+": "+why)
			_ = syscall.Kill(-p.pid, syscall.SIGKILL) // do not leak it past the test
		}
	}
	sort.Strings(survivors)
	if len(survivors) > 0 {
		t.Errorf("workloads survived Stop:\n%s", strings.Join(survivors, "\n"))
	}
	if left := pidFiles(t, dir); len(left) > 0 {
		t.Errorf("pid files left after Stop (allocations not seen exit): %v", left)
	}
	// Stop asked first: each trainer of the gang checkpointed on SIGTERM
	// and exited as a preempted workload does, not by SIGKILL.
	for _, a := range pretrain.Allocations {
		ad := allocDir(dir, a.NodeID, a.ID)
		out, _ := os.ReadFile(filepath.Join(ad, "stdout.log"))
		if !strings.Contains(string(out), "SIGTERM: checkpointed step") {
			errOut, _ := os.ReadFile(filepath.Join(ad, "stderr.log"))
			t.Errorf("%s did not checkpoint on SIGTERM; stdout:\n%s\nstderr:\n%s", a.ID, out, errOut)
		}
		var exit model.ActualAlloc
		b, err := os.ReadFile(filepath.Join(ad, "exit"))
		if err == nil {
			err = json.Unmarshal(b, &exit)
		}
		if err != nil {
			t.Errorf("%s: exit record: %v", a.ID, err)
			continue
		}
		if exit.ExitCode != 143 || exit.Killed || exit.Checkpoint == "" {
			t.Errorf("%s exited %+v; want exit code 143, not killed, with a checkpoint", a.ID, exit)
		}
	}
}

// TestRestartKeepsState stops a stack and starts another on the same data
// directory: the admin token, the jobs and the deployments carry over,
// the agents come back in a new boot epoch, the work they held is
// requeued and placed again, and the demo's mix is not submitted twice.
func TestRestartKeepsState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// Room for the holder beside the demo's small work: after the
	// restart every job is requeued as its agent reports the stop, in
	// no fixed order, and the holder must not depend on going first.
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", Nodes: 12, Pods: 1, GPUsPerNode: 8,
		Interval: 200 * time.Millisecond, Berth: os.Args[0]}
	s1, stop1 := startStack(t, cfg)

	acc, err := s1.API.SubmitJob(ctx, api.JobRequest{Name: "holder", Org: "ml", Team: "research", GPUs: 8, Topology: "node", Priority: 100,
		Command: []string{"sleep", "3600"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID string `json:"deployment_id"`
	}
	if err := s1.API.Do(ctx, http.MethodPost, "/v1/deployments", api.DeploymentRequest{Name: "keeper", Model: "keeper-7b", Team: "serving",
		ReplicaShape: api.ReplicaShape{GPUs: 8, Topology: "node"}, MinReplicas: 1, MaxReplicas: 1}, &created); err != nil {
		t.Fatal(err)
	}
	if created.ID != "keeper" {
		t.Fatalf("deployment id %q; want its name", created.ID)
	}
	var before api.Job
	eventually(t, 30*time.Second, "the job and the deployment placed", func() error {
		if before, err = s1.API.Job(ctx, acc.JobID); err != nil {
			return err
		}
		if before.State != model.JobRunning || len(before.Allocations) == 0 {
			return fmt.Errorf("holder is %s with %d allocations", before.State, len(before.Allocations))
		}
		for _, a := range before.Allocations {
			if act, ok := s1.agentAlloc(a.NodeID, a.ID); !ok || act.State != model.ActualRunning {
				return fmt.Errorf("agent %s reports %s as %+v", a.NodeID, a.ID, act)
			}
		}
		d, err := deployment(ctx, s1.API, "keeper")
		if err != nil {
			return err
		}
		if d.Actual != 1 {
			return fmt.Errorf("keeper has %d replicas", d.Actual)
		}
		return nil
	})
	oldAllocs := map[string]bool{}
	for _, a := range before.Allocations {
		oldAllocs[a.ID] = true
	}
	demo := Demo{Day: time.Hour, SweepEvery: time.Hour}
	if err := s1.RunDemo(ctx, demo); err != nil {
		t.Fatalf("RunDemo: %v", err)
	}
	jobs, err := listJobs(ctx, s1.API)
	if err != nil {
		t.Fatal(err)
	}
	firstPretrain := named(jobs, "pretrain-32")
	if len(firstPretrain) != 1 {
		t.Fatalf("%d jobs named pretrain-32 after the first RunDemo", len(firstPretrain))
	}
	admin := s1.Admin
	stop1()

	cfg.Listen = "127.0.0.1:0"
	s2, _ := startStack(t, cfg)
	if s2.Admin != admin {
		t.Errorf("admin token after restart %q; want the first one %q", s2.Admin, admin)
	}
	// The first token, on a client of its own, is accepted by the new server.
	if _, err := listJobs(ctx, client.New(s2.Addr, admin)); err != nil {
		t.Fatalf("the first admin token against the restarted server: %v", err)
	}
	if j, err := s2.API.Job(ctx, acc.JobID); err != nil || j.Name != "holder" {
		t.Fatalf("job %s after restart: %+v, %v", acc.JobID, j.Job, err)
	}
	if d, err := deployment(ctx, s2.API, "keeper"); err != nil || d.ID != "keeper" || d.MinReplicas != 1 {
		t.Fatalf("deployment keeper after restart: %+v, %v", d, err)
	}
	// The same boot: the agents are the same incarnations (R5's epoch
	// moves with the boot, not with the process). They stopped their work
	// on the way down and say so.
	for node, e := range s2.epochs() {
		if e != 1 {
			t.Errorf("agent %s runs in boot epoch %d; want 1", node, e)
		}
	}
	eventually(t, 30*time.Second, "every node back in boot epoch 1", func() error {
		nodes, err := listNodes(ctx, s2.API)
		if err != nil {
			return err
		}
		if len(nodes) != cfg.Nodes {
			return fmt.Errorf("%d nodes listed", len(nodes))
		}
		for id, n := range nodes {
			if n.BootEpoch != 1 {
				return fmt.Errorf("node %s in boot epoch %d", id, n.BootEpoch)
			}
		}
		return nil
	})
	eventually(t, 30*time.Second, "the job requeued and running again, the deployment back to min", func() error {
		j, err := s2.API.Job(ctx, acc.JobID)
		if err != nil {
			return err
		}
		if j.State != model.JobRunning || len(j.Allocations) == 0 {
			return fmt.Errorf("holder is %s with %d allocations (%+v; history %v)", j.State, len(j.Allocations), j.PendingReason, j.History)
		}
		for _, a := range j.Allocations {
			if oldAllocs[a.ID] {
				return fmt.Errorf("holder still has allocation %s from before the restart", a.ID)
			}
			if act, ok := s2.agentAlloc(a.NodeID, a.ID); !ok || act.State != model.ActualRunning {
				return fmt.Errorf("agent %s reports %s as %+v", a.NodeID, a.ID, act)
			}
		}
		if !slices.ContainsFunc(j.History, func(e model.Event) bool { return e.Event == "requeued" && e.Detail == "agent_shutdown" }) {
			return fmt.Errorf("no requeue for the restart in the history %+v", j.History)
		}
		d, err := deployment(ctx, s2.API, "keeper")
		if err != nil {
			return err
		}
		if d.Actual != 1 {
			return fmt.Errorf("keeper has %d replicas", d.Actual)
		}
		return nil
	})

	// A restart is not a preemption: the shutdown's stops are not in the
	// budget, nothing warns of a preemption rate, nothing pages.
	if j, err := s2.API.Job(ctx, acc.JobID); err != nil || j.PreemptCount != 0 {
		t.Errorf("holder after the restart: preempt count %d (%v), want 0", j.PreemptCount, err)
	}
	if n, _ := s2.Server.Controller.RecentPreemptions(time.Now()); n != 0 {
		t.Errorf("%d preemptions recorded across a restart, want 0", n)
	}
	for _, a := range s2.Server.Controller.Alerts() {
		if a.ResolvedAt == nil && (a.Kind == "preemption_rate" || a.Severity == "page") {
			t.Errorf("open alert after a restart: %s %s: %s", a.Severity, a.Kind, a.Message)
		}
	}

	// The demo again: its jobs carry idempotency keys, its deployments
	// exist; nothing is submitted twice.
	if err := s2.RunDemo(ctx, demo); err != nil {
		t.Fatalf("RunDemo after restart: %v", err)
	}
	jobs, err = listJobs(ctx, s2.API)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pretrain-32", "finetune-8", "holder"} {
		if got := named(jobs, name); len(got) != 1 {
			t.Errorf("%d jobs named %s after a restart and a second RunDemo; want 1", len(got), name)
		}
	}
	if pt := named(jobs, "pretrain-32"); len(pt) == 1 && pt[0].ID != firstPretrain[0].ID {
		t.Errorf("pretrain-32 is %s after the restart; was %s", pt[0].ID, firstPretrain[0].ID)
	}
	var deps api.DeploymentList
	if err := s2.API.Do(ctx, http.MethodGet, "/v1/deployments", nil, &deps); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range deps.Deployments {
		ids = append(ids, d.ID)
	}
	if want := []string{"chat", "embed", "keeper"}; !slices.Equal(ids, want) {
		t.Errorf("deployments %v; want %v", ids, want)
	}
}
