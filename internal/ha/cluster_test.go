package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent"
	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// berth is the binary under test, built once for the package.
var berth string

func TestMain(m *testing.M) {
	agent.MaybeShim()
	dir, err := os.MkdirTemp("", "berth-ha-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	berth = filepath.Join(dir, "berth")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	build := exec.Command(gobin, "build", "-o", berth, "github.com/berthsched/berth/cmd/berth")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building berth:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const ttl = 2 * time.Second

// member is one `berth server` process and the etcd member inside it.
type member struct {
	name, api, peer, client, dir string
	cmd                          *exec.Cmd
	done                         chan struct{}
	log                          *os.File
}

func (m *member) url() string { return "http://" + m.api }

// cluster is three members on loopback.
type cluster struct {
	t       *testing.T
	members []*member
	admin   string
	mu      sync.Mutex
	// agentArgs are more flags for every agent started.
	agentArgs []string
}

// freePort picks a port outside the kernel's ephemeral range (where every
// other test's ":0" listener lands) that is free right now. A server
// process binds it later, so a collision is still possible; newCluster
// starts over when a member fails to come up.
// handedOut holds every port freePort returned in this process: a port is
// closed again between the check and its server's bind, so without it
// two members of one cluster could draw the same one (seen once in CI as
// "bind: address already in use").
var handedOut sync.Map

func freePort(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		if _, dup := handedOut.Load(addr); dup {
			continue
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			handedOut.Store(addr, true)
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := tryCluster(t)
		if err == nil {
			return c
		}
		if attempt == 3 {
			t.Fatalf("cluster: %v", err)
		}
		t.Logf("cluster attempt %d: %v; starting over", attempt, err)
	}
}

// tryCluster starts three members; an error means one did not come up.
func tryCluster(t *testing.T) (*cluster, error) {
	t.Helper()
	c := &cluster{t: t}
	root := t.TempDir()
	var initial []string
	for i := range 3 {
		m := &member{name: fmt.Sprintf("s%d", i), api: freePort(t), peer: freePort(t), client: freePort(t),
			dir: filepath.Join(root, fmt.Sprintf("s%d", i))}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"=http://"+m.peer)
	}
	for _, m := range c.members {
		c.start(m, strings.Join(initial, ","))
	}
	// Every member up: its process alive and its API answering.
	deadline := time.Now().Add(60 * time.Second)
	for _, m := range c.members {
		for {
			select {
			case <-m.done:
				b, _ := os.ReadFile(filepath.Join(m.dir, "server.log"))
				for _, o := range c.members {
					c.kill(o)
				}
				return nil, fmt.Errorf("%s exited at start: %s", m.name, strings.TrimSpace(string(b)))
			default:
			}
			if st, _, _, err := request(m.api, "", http.MethodGet, "/healthz", nil); err == nil && st == 200 {
				break
			}
			if time.Now().After(deadline) {
				for _, o := range c.members {
					c.kill(o)
				}
				return nil, fmt.Errorf("%s did not answer within 60 s", m.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range c.members {
				t.Logf("--- %s log tail ---\n%s", m.name, tail(filepath.Join(m.dir, "server.log"), 30))
				if m.cmd != nil {
					t.Logf("--- %s goroutines in berth code ---\n%s", m.name, c.stacks(m))
				}
			}
		}
		for _, m := range c.members {
			c.kill(m)
		}
	})
	c.waitAdminToken(60 * time.Second)
	c.waitLeader(nil, 30*time.Second)
	return c, nil
}

// waitAdminToken waits for the admin token the first leader saves in its
// data dir. A token counts once it is whole and the server it came from
// knows it: read while the file was being written (it was not written
// atomically then), an empty token failed every request with 401 for good,
// and the cluster looked leaderless for the whole test.
func (c *cluster) waitAdminToken(limit time.Duration) {
	c.t.Helper()
	c.eventually("admin token saved by the first leader", limit, func() error {
		for _, m := range c.members {
			b, err := os.ReadFile(filepath.Join(m.dir, "admin.token"))
			if tok := strings.TrimSpace(string(b)); err == nil && tok != "" {
				if st, _, _, err := request(m.api, tok, http.MethodGet, "/v1/nodes", nil); err == nil && st == 200 {
					c.admin = tok
					return nil
				}
			}
		}
		return fmt.Errorf("no admin.token yet")
	})
}

func (c *cluster) start(m *member, initial string) {
	c.t.Helper()
	if initial == "" {
		var parts []string
		for _, o := range c.members {
			parts = append(parts, o.name+"=http://"+o.peer)
		}
		initial = strings.Join(parts, ",")
	}
	os.MkdirAll(m.dir, 0o700)
	log, err := os.OpenFile(filepath.Join(m.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	m.log = log
	m.cmd = exec.Command(berth, "server", "--listen", m.api, "--data-dir", m.dir, "--name", m.name,
		"--etcd-client-url", "http://"+m.client, "--etcd-peer-url", "http://"+m.peer, "--initial-cluster", initial,
		"--election-ttl", ttl.String(), "--heartbeat-interval", "200ms", "--lost-after", "30s", "--log-json")
	m.cmd.Stdout, m.cmd.Stderr = log, log
	// Killed with the test process, however it ends.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(m.cmd, m.done)
}

// kill is kill -9.
func (c *cluster) kill(m *member) {
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGCONT)
	m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
	m.log.Close()
}

// stacks ends m with SIGQUIT and returns, from the dump the Go runtime
// writes, the goroutines that run berth code, deduplicated: what a
// member that went silent was waiting on.
func (c *cluster) stacks(m *member) string {
	m.cmd.Process.Signal(syscall.SIGCONT)
	m.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		return "(no dump within 5 s)"
	}
	b, _ := os.ReadFile(filepath.Join(m.dir, "server.log"))
	dump := string(b)
	if i := strings.LastIndex(dump, "SIGQUIT: quit"); i >= 0 {
		dump = dump[i:]
	}
	seen := map[string]int{}
	var order []string
	for _, block := range strings.Split(dump, "\n\n") {
		if !strings.Contains(block, "berthsched/berth/") {
			continue
		}
		lines := strings.Split(block, "\n")
		state := lines[0]
		if i := strings.Index(state, "["); i >= 0 {
			state = state[i:]
		}
		var funcs []string
		for _, l := range lines[1:] {
			if l != "" && !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "runtime.") && len(funcs) < 8 {
				funcs = append(funcs, "  "+l)
			}
		}
		key := state + "\n" + strings.Join(funcs, "\n")
		if seen[key] == 0 {
			order = append(order, key)
		}
		seen[key]++
	}
	var out []string
	for _, k := range order {
		out = append(out, fmt.Sprintf("%d× %s", seen[k], k))
	}
	return strings.Join(out, "\n")
}

func (c *cluster) signal(m *member, sig syscall.Signal) {
	if err := m.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) alive() []*member {
	var out []*member
	for _, m := range c.members {
		if m.cmd != nil {
			out = append(out, m)
		}
	}
	return out
}

func (c *cluster) eventually(what string, limit time.Duration, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("%s: not within %v: %v", what, limit, err)
}

// leader asks a member who leads; the answer counts only if the leader
// itself confirms it leads. The error says what each member answered.
func (c *cluster) leader(skip *member) (*member, int64, error) {
	ask := func(m *member) (api.Leader, error) {
		var l api.Leader
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := client.New(m.api, c.admin).Do(ctx, http.MethodGet, "/v1/leader", nil, &l)
		return l, err
	}
	var said []string
	for _, m := range c.alive() {
		if m == skip {
			continue
		}
		l, err := ask(m)
		switch {
		case err != nil:
			said = append(said, fmt.Sprintf("%s: %v", m.name, err))
			continue
		case l.Leader == "":
			said = append(said, m.name+": no leader")
			continue
		}
		said = append(said, fmt.Sprintf("%s: %s leads", m.name, l.Leader))
		for _, o := range c.alive() {
			if o.url() == l.Leader && o != skip {
				self, err := ask(o)
				if err == nil && self.IsSelf {
					return o, self.Fence, nil
				}
				said = append(said, fmt.Sprintf("%s itself: is_self %v, %v", o.name, self.IsSelf, err))
			}
		}
	}
	return nil, 0, fmt.Errorf("no confirmed leader (%s)", strings.Join(said, "; "))
}

// waitLeader waits for a leader other than skip, and says how long it took.
func (c *cluster) waitLeader(skip *member, limit time.Duration) (*member, int64, time.Duration) {
	c.t.Helper()
	t0 := time.Now()
	var m *member
	var fence int64
	c.eventually("a leader", limit, func() error {
		var err error
		m, fence, err = c.leader(skip)
		return err
	})
	return m, fence, time.Since(t0)
}

// api is a client that talks to any live member, moving on when one fails.
func (c *cluster) client(token string) *multi {
	return &multi{c: c, token: token}
}

type multi struct {
	c     *cluster
	token string
	next  int
	mu    sync.Mutex
}

// do sends one request to one live member (round robin) and returns the
// status, the body and the response headers.
func (x *multi) do(method, path string, body any, header ...string) (int, []byte, http.Header, error) {
	alive := x.c.alive()
	if len(alive) == 0 {
		return 0, nil, nil, fmt.Errorf("no member")
	}
	x.mu.Lock()
	m := alive[x.next%len(alive)]
	x.next++
	x.mu.Unlock()
	return request(m.api, x.token, method, path, body, header...)
}

var httpClient = &http.Client{Timeout: 15 * time.Second}

func request(addr, token, method, path string, body any, header ...string) (int, []byte, http.Header, error) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, "http://"+addr+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), resp.Header, nil
}

// fleet is in-process agents with fake GPUs that know every member.
type fleet struct {
	agents map[string]*agent.Agent
	cancel context.CancelFunc
	done   []chan struct{}
	dirs   map[string]string
}

func (c *cluster) startFleet(nodes ...string) *fleet {
	c.t.Helper()
	f := &fleet{agents: map[string]*agent.Agent{}, dirs: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	var servers []string
	for _, m := range c.members {
		servers = append(servers, m.api)
	}
	for _, id := range nodes {
		var tok api.Token
		c.eventually("agent token", 20*time.Second, func() error {
			st, body, _, err := c.client(c.admin).do(http.MethodPost, "/v1/tokens", api.TokenRequest{Role: "agent:" + id})
			if err != nil || st != 201 {
				return fmt.Errorf("%d %s %v", st, body, err)
			}
			return json.Unmarshal(body, &tok)
		})
		dir := filepath.Join(c.t.TempDir(), id)
		b, _ := gpu.NewFake(gpu.FakeConfig{GPUs: 8, UUIDPrefix: id + "-"})
		a, err := agent.New(agent.Config{Servers: servers, Token: tok.Secret, NodeID: id, Pod: "p1", StateDir: dir, Backend: b,
			Interval: 200 * time.Millisecond, CPUMilli: 64000, MemoryMiB: 512 << 10, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			c.t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.Run(ctx)
		}()
		f.agents[id], f.dirs[id] = a, dir
		f.done = append(f.done, done)
	}
	c.t.Cleanup(func() {
		f.cancel()
		for _, d := range f.done {
			<-d
		}
		for _, a := range f.agents {
			a.StopAll(2 * time.Second)
			a.Close()
		}
	})
	c.eventually("nodes registered", 30*time.Second, func() error {
		st, body, _, err := c.client(c.admin).do(http.MethodGet, "/v1/nodes", nil)
		if err != nil || st != 200 {
			return fmt.Errorf("%d %v", st, err)
		}
		var list api.NodeList
		json.Unmarshal(body, &list)
		if len(list.Nodes) != len(nodes) {
			return fmt.Errorf("%d nodes", len(list.Nodes))
		}
		return nil
	})
	return f
}

// submit posts a job to any member, with an idempotency key, until it is
// acknowledged or the limit passes.
func (c *cluster) submit(req api.JobRequest, key string, limit time.Duration) (api.JobAccepted, error) {
	cl := c.client(c.admin)
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		st, body, _, err := cl.do(http.MethodPost, "/v1/jobs", req, "Idempotency-Key", key)
		if err == nil && st == http.StatusAccepted {
			var acc api.JobAccepted
			return acc, json.Unmarshal(body, &acc)
		}
		last = fmt.Errorf("%d %s %v", st, body, err)
		time.Sleep(50 * time.Millisecond)
	}
	return api.JobAccepted{}, last
}

func (c *cluster) job(id string) (api.Job, error) {
	st, body, _, err := c.client(c.admin).do(http.MethodGet, "/v1/jobs/"+id, nil)
	if err != nil {
		return api.Job{}, err
	}
	if st != 200 {
		return api.Job{}, fmt.Errorf("%d %s", st, body)
	}
	var j api.Job
	return j, json.Unmarshal(body, &j)
}

// longJob is a real process that runs until stopped.
func longJob(name string, gpus int) api.JobRequest {
	return api.JobRequest{Name: name, Team: "t", GPUs: gpus, Topology: "node",
		Command: []string{berth, "workload", "train", "--steps", "1000000", "--step-time", "100ms"}}
}

// running waits for a job to run and returns its allocation and the pid
// of its process.
func (c *cluster) running(f *fleet, id string) (model.Allocation, int) {
	c.t.Helper()
	var a model.Allocation
	var pid int
	c.eventually("job "+id+" running", 30*time.Second, func() error {
		j, err := c.job(id)
		if err != nil {
			return err
		}
		if j.State != model.JobRunning || len(j.Allocations) == 0 {
			return fmt.Errorf("%s", j.State)
		}
		a = j.Allocations[0]
		b, err := os.ReadFile(filepath.Join(f.dirs[a.NodeID], "allocs", a.ID, "pid"))
		if err != nil {
			return err
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err
	})
	return a, pid
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// noDoubleBinding checks the table: no GPU in two allocations.
func (c *cluster) noDoubleBinding() {
	c.t.Helper()
	st, body, _, err := c.client(c.admin).do(http.MethodGet, "/v1/jobs", nil)
	if err != nil || st != 200 {
		c.t.Fatalf("list jobs: %d %v", st, err)
	}
	var list api.JobList
	json.Unmarshal(body, &list)
	used := map[string]model.GPUMask{}
	owner := map[string]string{}
	for _, j := range list.Jobs {
		for _, a := range j.Allocations {
			if used[a.NodeID]&a.GPUs != 0 {
				c.t.Fatalf("GPUs %s of %s bound twice: %s and %s", (used[a.NodeID] & a.GPUs).String(), a.NodeID, owner[a.NodeID], j.ID)
			}
			used[a.NodeID] |= a.GPUs
			owner[a.NodeID] += " " + j.ID
		}
	}
}

// tokenFor makes a token for a role.
func (c *cluster) tokenFor(role string) string {
	c.t.Helper()
	var tok api.Token
	c.eventually("token "+role, 20*time.Second, func() error {
		st, body, _, err := c.client(c.admin).do(http.MethodPost, "/v1/tokens", api.TokenRequest{Role: role})
		if err != nil || st != 201 {
			return fmt.Errorf("%d %s %v", st, body, err)
		}
		return json.Unmarshal(body, &tok)
	})
	return tok.Secret
}

// steady is a cluster with two agents and one real workload running: the
// work a fault must not disturb.
func steady(t *testing.T) (*cluster, *fleet, api.JobAccepted, model.Allocation, int) {
	t.Helper()
	c := newCluster(t)
	f := c.startFleet("n1", "n2")
	acc, err := c.submit(longJob("steady", 4), "steady", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	alloc, pid := c.running(f, acc.JobID)
	return c, f, acc, alloc, pid
}

// sleeper is a workload that runs until stopped, for jobs whose work
// does not matter to the test (a job must name something to run).
var sleeper = []string{"sleep", "3600"}
