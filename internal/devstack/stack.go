package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/berthsched/berth/internal/agent"
	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/server"
	"github.com/berthsched/berth/internal/store"
)

// Config sizes the stack.
type Config struct {
	DataDir     string
	Listen      string
	Nodes, Pods int
	GPUsPerNode int
	Model       string
	// SharingNodes are the last nodes of the fleet, put in the sharing
	// pool, where jobs may ask for a share of a GPU (gpu_milli).
	SharingNodes int
	// NodePools labels nodes by ID (n000, n001, ...) with a pool, as an
	// operator labels agents (--pool): the shape pools of R1. It takes
	// precedence over SharingNodes.
	NodePools map[string]string
	// Interval is the heartbeat interval, for server and agents.
	Interval time.Duration
	// Sched overrides the scheduling config (dev compresses time).
	Sched sched.Config
	// HistoryEvery is how often the dashboard's plots get a sample
	// (the control plane's default, 30 s, when zero).
	HistoryEvery time.Duration
	// Berth is the berth binary the demo workloads run (`berth workload`).
	Berth string
	// Container is how the agents run jobs that name an image (podman).
	Container agent.ContainerConfig
	Logger    *slog.Logger
}

// Validate names the flag that is wrong.
func (c *Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 4096:
		return fmt.Errorf("--nodes: %d: expected 1 to 4096", c.Nodes)
	case c.Pods < 1 || c.Pods > c.Nodes:
		return fmt.Errorf("--pods: %d: expected 1 to --nodes (%d)", c.Pods, c.Nodes)
	case c.GPUsPerNode < 1 || c.GPUsPerNode > model.MaxGPUsPerNode:
		return fmt.Errorf("--gpus-per-node: %d: expected 1 to %d", c.GPUsPerNode, model.MaxGPUsPerNode)
	case c.DataDir == "":
		return errors.New("--data-dir: required")
	case c.SharingNodes < 0 || c.SharingNodes > c.Nodes:
		return fmt.Errorf("--sharing-nodes: %d: expected 0 to --nodes (%d)", c.SharingNodes, c.Nodes)
	}
	return nil
}

// Stack is a running berth.
type Stack struct {
	cfg    Config
	Server *server.Instance
	// Admin is the admin token; URL the dashboard with it in the fragment.
	Admin string
	Addr  string
	API   *client.Client

	mu     sync.Mutex
	agents []*node
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type node struct {
	*agent.Agent
	id    string
	state string
	done  chan struct{}
}

// Start brings the stack up: server, then one agent per node. It returns
// once every node has registered.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Model == "" {
		cfg.Model = "H100"
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	adminFile := filepath.Join(cfg.DataDir, "admin.token")
	s := &Stack{cfg: cfg}
	in, err := server.Start(ctx, server.Config{Listen: cfg.Listen, DataDir: filepath.Join(cfg.DataDir, "server"),
		Control: control.Config{HeartbeatInterval: cfg.Interval, Sched: cfg.Sched, HistoryEvery: cfg.HistoryEvery}, Logger: cfg.Logger,
		Bootstrap: func(secret string) {
			if err := server.SaveToken(adminFile, secret); err != nil {
				cfg.Logger.Error("cannot save the admin token", "file", adminFile, "err", err)
			}
		}})
	if err != nil {
		return nil, err
	}
	s.Server, s.Addr = in, in.Addr
	fail := func(err error) (*Stack, error) {
		s.Stop()
		return nil, err
	}
	if err := waitFor(ctx, 60*time.Second, func() bool { _, err := os.Stat(adminFile); return err == nil && in.Controller.Leading() }); err != nil {
		return fail(fmt.Errorf("server did not come up: %w", err))
	}
	b, err := os.ReadFile(adminFile)
	if err != nil {
		return fail(err)
	}
	s.Admin = strings.TrimSpace(string(b))
	s.API = client.New(s.Addr, s.Admin)
	actx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	perPod := (cfg.Nodes + cfg.Pods - 1) / cfg.Pods
	for i := range cfg.Nodes {
		id := fmt.Sprintf("n%03d", i)
		pod := fmt.Sprintf("pod-%c", 'a'+rune(i/perPod%26))
		pool := ""
		if i >= cfg.Nodes-cfg.SharingNodes {
			pool = "sharing"
		}
		if p, ok := cfg.NodePools[id]; ok {
			pool = p
		}
		if err := s.startAgent(ctx, actx, id, pod, pool); err != nil {
			return fail(err)
		}
	}
	// Registered means the table has each agent's epoch of this run (after a
	// restart the table still lists the nodes of the last one).
	if err := waitFor(ctx, 60*time.Second, s.registered); err != nil {
		return fail(fmt.Errorf("agents did not register: %w", err))
	}
	return s, nil
}

// startAgent runs one node's agent with its own token (kept in its state
// dir, so a restart reuses it).
func (s *Stack) startAgent(ctx, actx context.Context, id, pod, pool string) error {
	state := filepath.Join(s.cfg.DataDir, "agents", id)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	tokFile := filepath.Join(state, "token")
	tok := ""
	if b, err := os.ReadFile(tokFile); err == nil {
		tok = strings.TrimSpace(string(b))
	} else {
		t, err := s.API.CreateToken(ctx, "agent:"+id, "dev agent "+id)
		if err != nil {
			return fmt.Errorf("agent token for %s: %w", id, err)
		}
		tok = t.Secret
		if err := server.SaveToken(tokFile, tok); err != nil {
			return err
		}
	}
	b, err := gpu.NewFake(gpu.FakeConfig{GPUs: s.cfg.GPUsPerNode, Model: s.cfg.Model, UUIDPrefix: id + "-",
		InjectFile: filepath.Join(state, "inject"), Logger: s.cfg.Logger})
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{Servers: []string{s.Addr}, Token: tok, NodeID: id, Pod: pod, Pool: pool, StateDir: state, Backend: b,
		Interval: s.cfg.Interval, CPUMilli: int64(s.cfg.GPUsPerNode) * 16000, MemoryMiB: int64(s.cfg.GPUsPerNode) * 256 * 1024,
		OrphanGrace: 5 * time.Second, Container: s.cfg.Container, Logger: s.cfg.Logger.With("agent", id)})
	if err != nil {
		return fmt.Errorf("agent %s: %w", id, err)
	}
	n := &node{Agent: a, id: id, state: state, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		_ = a.Run(actx)
	}()
	s.mu.Lock()
	s.agents = append(s.agents, n)
	s.mu.Unlock()
	return nil
}

func (s *Stack) registered() bool {
	s.mu.Lock()
	agents := s.agents
	s.mu.Unlock()
	epochs := map[string]uint64{}
	s.Server.Store.Cache().Read(func(v store.View) {
		v.Each(store.Nodes, func(_ string, e store.Entry) {
			n := e.Obj.(model.Node)
			epochs[n.ID] = n.BootEpoch
		})
	})
	for _, n := range agents {
		if epochs[n.id] != n.Epoch() {
			return false
		}
	}
	return len(agents) > 0
}

// URL is the dashboard, with the admin token in the fragment (never sent
// to the server in a request line or a log).
func (s *Stack) URL() string { return "http://" + s.Addr + "/#token=" + s.Admin }

// Go runs f until the stack stops.
func (s *Stack) Go(f func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	prev := s.cancel
	s.cancel = func() { cancel(); prev() }
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(ctx)
	}()
}

// Stop ends everything: the demo's goroutines, the agents' loops, every
// workload (SIGTERM, then SIGKILL after a grace), the server.
func (s *Stack) Stop() error {
	s.mu.Lock()
	cancel, agents, srv := s.cancel, s.agents, s.Server
	s.cancel, s.agents, s.Server = nil, nil, nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
	var wg sync.WaitGroup
	for _, n := range agents {
		<-n.done
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.StopAll(5 * time.Second)
			n.Close()
		}()
	}
	wg.Wait()
	if srv != nil {
		return srv.Stop()
	}
	return nil
}

func waitFor(ctx context.Context, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
