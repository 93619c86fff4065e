package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/server"
	"github.com/berthsched/berth/internal/workload"
)

// TestMain doubles as the workloads the tests run: with BERTH_TEST_WORKLOAD
// set, this binary is a real workload process (the same code as `berth
// workload`), not a test run.
func TestMain(m *testing.M) {
	MaybeShim()
	if w := os.Getenv("BERTH_TEST_WORKLOAD"); w != "" {
		os.Exit(helperWorkload(w, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func helperWorkload(kind string, args []string) int {
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	steps := fs.Int("steps", 10, "")
	stepTime := fs.Duration("step-time", 50*time.Millisecond, "")
	every := fs.Int("checkpoint-every", 0, "")
	ckBytes := fs.Int64("checkpoint-bytes", 0, "")
	ckBW := fs.Float64("checkpoint-bandwidth", 0, "")
	load := fs.Duration("load-time", 0, "")
	marker := fs.String("marker", "", "")
	elastic := fs.Bool("elastic", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch kind {
	case "train":
		cfg := workload.TrainConfig{Steps: *steps, StepTime: *stepTime, CheckpointEvery: *every,
			CheckpointBytes: *ckBytes, CheckpointBandwidth: *ckBW, Out: os.Stdout, Elastic: *elastic}
		if *elastic {
			cfg.Resize = workload.ResizeSignal()
		}
		err := workload.Train(workload.StopSignal(), cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return workload.ExitCode(err)
	case "serve":
		err := workload.Serve(workload.StopSignal(), workload.ServeConfig{Listen: "127.0.0.1:0", Drain: 2 * time.Second, Load: *load, Out: os.Stdout})
		return workload.ExitCode(err)
	case "stubborn":
		// Ignores SIGTERM, noting when it came: only SIGKILL ends it.
		sig := make(chan os.Signal, 1)
		signalNotify(sig)
		fmt.Println("ready")
		for range sig {
			_ = os.WriteFile(*marker, []byte(time.Now().Format(time.RFC3339Nano)), 0o644)
		}
	case "polite":
		// Exits on SIGTERM after noting it.
		sig := make(chan os.Signal, 1)
		signalNotify(sig)
		fmt.Println("ready")
		<-sig
		_ = os.WriteFile(*marker, []byte(time.Now().Format(time.RFC3339Nano)), 0o644)
		return 0
	case "abandon":
		// Leaves a SIGTERM-ignoring child in its group and exits on
		// SIGTERM: the group is not gone until the child is.
		return abandon(*marker)
	}
	return 3
}

// waitLimit bounds every poll: generous, for a loaded two-core machine.
const waitLimit = 30 * time.Second

func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v: %v", what, waitLimit, err)
}

// fleet is a real berth server (embedded etcd, real HTTP) and real agents
// with fake GPUs, all in this process; the workloads are real processes.
type fleet struct {
	t      *testing.T
	dir    string
	listen string
	admin  string
	cfg    server.Config
	in     *server.Instance
	api    *client.Client
	agents map[string]*runningAgent
	mu     sync.Mutex
	// mig partitions an agent's fake GPUs (by node id): GPU → slices.
	mig map[string]map[int][]int
	// boot stands in for the kernel's boot id (by node id): a new value
	// is a reboot as the agent sees it.
	boot map[string]string
	// ctr is the container driver the agents get, when set.
	ctr *ContainerConfig
}

type runningAgent struct {
	*Agent
	stateDir string
	inject   string
	cancel   context.CancelFunc
	done     chan struct{}
	server   string
}

const hbInterval = 150 * time.Millisecond

func newFleet(t *testing.T) *fleet { return newFleetWith(t, nil) }

// newFleetWith is newFleet with the server's config adjusted first.
func newFleetWith(t *testing.T, adjust func(*server.Config)) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: t.TempDir(), agents: map[string]*runningAgent{}, boot: map[string]string{}}
	tokens := make(chan string, 1)
	f.cfg = server.Config{DataDir: filepath.Join(f.dir, "server"),
		Control: control.Config{HeartbeatInterval: hbInterval, Tick: 50 * time.Millisecond,
			// Preemption is under test, not its thresholds: no minimum
			// runtime, and a budget one small fleet cannot exhaust.
			// Ranked by priority alone: these tests drive preemption with
			// small jobs, which §1's SLO tiers would have wait instead.
			Sched: sched.Config{MinRuntime: time.Millisecond, GrowAfter: time.Millisecond, Budget: sched.Budget{Warn: 10, Page: 20}, SLO: sched.SLO{MaxGPUs: -1}}},
		Logger:    slog.New(slog.DiscardHandler),
		Bootstrap: func(s string) { tokens <- s }}
	if adjust != nil {
		adjust(&f.cfg)
	}
	f.firstStart()
	f.admin = <-tokens
	f.api = client.New(f.listen, f.admin)
	t.Cleanup(f.stop)
	return f
}

// firstStart starts the server on a port nobody else is likely to take:
// one outside the kernel's ephemeral range (where every other process's
// ":0" listener and outgoing connection lands; CI once lost a ":0" port
// picked here to another socket before the server bound it), drawn
// again if it is taken by the time the server binds. Restarts reuse it:
// the agents know the address.
func (f *fleet) firstStart() {
	f.t.Helper()
	for attempt := 1; ; attempt++ {
		f.listen = fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		f.cfg.Listen = f.listen
		in, err := server.Start(context.Background(), f.cfg)
		if err == nil {
			f.started(in)
			return
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			f.t.Fatalf("server: %v", err)
		}
	}
}

func (f *fleet) startServer() {
	f.t.Helper()
	in, err := server.Start(context.Background(), f.cfg)
	if err != nil {
		f.t.Fatalf("server: %v", err)
	}
	f.started(in)
}

func (f *fleet) started(in *server.Instance) {
	f.t.Helper()
	f.mu.Lock()
	f.in = in
	f.mu.Unlock()
	eventually(f.t, "server leading", func() error {
		if !in.Controller.Leading() {
			return fmt.Errorf("not leading")
		}
		return nil
	})
}

func (f *fleet) stopServer() {
	f.t.Helper()
	f.mu.Lock()
	in := f.in
	f.in = nil
	f.mu.Unlock()
	if in != nil {
		if err := in.Stop(); err != nil {
			f.t.Errorf("server stop: %v", err)
		}
	}
}

func (f *fleet) stop() {
	for id := range f.agents {
		f.stopAgent(id, true)
	}
	f.stopServer()
}

// agentConfig is an 8-GPU fake node.
func (f *fleet) agentConfig(id, pod, server string) Config {
	return f.agentConfigIn(id, pod, "", server)
}

// agentConfigIn is an 8-GPU fake node in a pool.
func (f *fleet) agentConfigIn(id, pod, pool, server string) Config {
	f.t.Helper()
	tok, err := f.api.CreateToken(context.Background(), "agent:"+id, id)
	if err != nil {
		f.t.Fatalf("agent token: %v", err)
	}
	state := filepath.Join(f.dir, "agents", id)
	b, err := gpu.NewFake(gpu.FakeConfig{GPUs: 8, UUIDPrefix: id + "-", InjectFile: filepath.Join(state, "inject"), MIG: f.mig[id]})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := Config{Servers: []string{server}, Token: tok.Secret, NodeID: id, Pod: pod, Pool: pool, StateDir: state, Backend: b,
		Interval: hbInterval, CPUMilli: 64000, MemoryMiB: 512 << 10, OrphanGrace: 2 * time.Second,
		StrayGrace: time.Second, BootID: f.boot[id], Logger: slog.New(slog.DiscardHandler)}
	if f.ctr != nil {
		cfg.Container = *f.ctr
	}
	return cfg
}

// startAgent runs an agent talking to server (the fleet's own when empty).
func (f *fleet) startAgent(id, server string) *runningAgent {
	f.t.Helper()
	return f.startAgentIn(id, "", server)
}

// startAgentIn runs an agent whose node is in a pool.
func (f *fleet) startAgentIn(id, pool, server string) *runningAgent {
	f.t.Helper()
	if server == "" {
		server = f.listen
	}
	cfg := f.agentConfigIn(id, "p1", pool, server)
	a, err := New(cfg)
	if err != nil {
		f.t.Fatalf("agent %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ra := &runningAgent{Agent: a, stateDir: cfg.StateDir, inject: filepath.Join(cfg.StateDir, "inject"), cancel: cancel, done: make(chan struct{}), server: server}
	go func() {
		defer close(ra.done)
		_ = a.Run(ctx)
	}()
	f.agents[id] = ra
	eventually(f.t, "node "+id+" registered", func() error {
		n, err := f.node(id)
		if err != nil {
			return err
		}
		if n.BootEpoch != a.Epoch() {
			return fmt.Errorf("table has epoch %d, agent %d", n.BootEpoch, a.Epoch())
		}
		return nil
	})
	return ra
}

// stopAgent ends an agent's loop; with work, it also stops what runs.
func (f *fleet) stopAgent(id string, work bool) {
	ra := f.agents[id]
	if ra == nil {
		return
	}
	delete(f.agents, id)
	ra.cancel()
	<-ra.done
	if work {
		ra.StopAll(2 * time.Second)
	}
	if err := ra.Close(); err != nil {
		f.t.Errorf("agent close: %v", err)
	}
}

func (f *fleet) node(id string) (api.Node, error) {
	var out api.Node
	err := f.api.Do(context.Background(), "GET", "/v1/nodes/"+id, nil, &out)
	return out, err
}

func (f *fleet) job(id string) api.Job {
	f.t.Helper()
	j, err := f.api.Job(context.Background(), id)
	if err != nil {
		f.t.Fatalf("job %s: %v", id, err)
	}
	return j
}

// submit posts a job whose command is this test binary as a workload.
func (f *fleet) submit(req api.JobRequest, kind string, args ...string) string {
	f.t.Helper()
	req.Command = append([]string{os.Args[0]}, args...)
	req.Env = map[string]string{"BERTH_TEST_WORKLOAD": kind}
	if req.Topology == "" {
		req.Topology = "node"
	}
	if req.Team == "" {
		req.Team = "t"
	}
	acc, err := f.api.SubmitJob(context.Background(), req, "")
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	return acc.JobID
}

// waitState waits for a job state and returns the job.
func (f *fleet) waitState(id string, state model.JobState) api.Job {
	f.t.Helper()
	var j api.Job
	eventually(f.t, fmt.Sprintf("job %s %s", id, state), func() error {
		j = f.job(id)
		if j.State != state {
			return fmt.Errorf("state %s, history %v", j.State, j.History)
		}
		return nil
	})
	return j
}

// running waits until the job's allocation runs on the agent, and returns
// the allocation id.
func (f *fleet) running(ra *runningAgent, job string) string {
	f.t.Helper()
	var id string
	eventually(f.t, "job "+job+" running on "+ra.cfg.NodeID, func() error {
		j := f.job(job)
		if j.State != model.JobRunning || len(j.Allocations) == 0 {
			return fmt.Errorf("state %s", j.State)
		}
		id = j.Allocations[0].ID
		for _, a := range ra.Allocations() {
			if a.ID == id && a.State == model.ActualRunning {
				return nil
			}
		}
		return fmt.Errorf("agent runs %v, table has %s", ra.Allocations(), id)
	})
	return id
}

// pid is an allocation's process, from its pid file.
func (ra *runningAgent) pid(t *testing.T, alloc string) int {
	t.Helper()
	var pid int
	eventually(t, "pid file of "+alloc, func() error {
		b, err := os.ReadFile(filepath.Join(ra.stateDir, "allocs", alloc, "pid"))
		if err != nil {
			return err
		}
		_, err = fmt.Sscan(string(b), &pid)
		return err
	})
	return pid
}

func alive(pid int) bool {
	st, err := readStat(pid)
	return err == nil && st.state != 'Z' && st.state != 'X'
}

func readLog(t *testing.T, ra *runningAgent, alloc, name string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(ra.stateDir, "allocs", alloc, name))
	return string(b)
}

func signalNotify(c chan os.Signal) { signal.Notify(c, syscall.SIGTERM) }

// abandon starts a stubborn child in its own process group and exits on
// SIGTERM, leaving the child behind.
func abandon(marker string) int {
	child := exec.Command(os.Args[0], "-marker", marker+".child")
	child.Env = append(os.Environ(), "BERTH_TEST_WORKLOAD=stubborn")
	child.Stdout = os.Stdout
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = os.WriteFile(marker+".childpid", []byte(strconv.Itoa(child.Process.Pid)), 0o644)
	sig := make(chan os.Signal, 1)
	signalNotify(sig)
	fmt.Println("ready")
	<-sig
	return 0
}
