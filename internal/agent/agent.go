package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthsched/berth/internal/agent/gpu"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// Agent is one node's agent. New prepares it; Run heartbeats until its
// context ends. Work keeps running after Run returns: only StopAll, or the
// next incarnation's start, ends it.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	state   *stateDir
	epoch   uint64
	bootID  string
	uuid    string
	backend gpu.Backend
	cg      *cgroups
	clients []*client.Client
	cur     int
	dead    map[int]time.Time // servers that did not answer, and when

	// Owned by the Run goroutine.
	inv      gpu.Inventory
	nvmlDown bool
	faults   []model.GPUFault // seen, not yet accepted by the control plane
	interval time.Duration
	gone     map[string]model.ActualAlloc // exits the control plane has released
	// refused are the allocations of the last orders the agent could not
	// act on, with why (sift); reported as exited until no longer listed.
	refused map[string]string
	prev    []model.ActualAlloc // the earlier epoch's checkpoints, until a report is accepted

	// leader is the server the last accepted heartbeat went to: the log
	// poll's first try.
	leader   atomic.Pointer[client.Client]
	fence    atomic.Int64
	accepted atomic.Int64
	rejected atomic.Int64

	mu     sync.Mutex
	allocs map[string]*alloc

	kick chan struct{}
}

// New locks the state directory and works out who this node is (R5): in
// the boot its epoch was taken in, it is the same incarnation and adopts
// the work an earlier agent process left running; after a reboot or on a
// wiped state directory it takes the next epoch and stops whatever an
// earlier one left. Either way, processes of this state directory that
// no allocation owns are stopped. Then it discovers the GPUs.
func New(cfg Config) (*Agent, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	st, err := openState(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, state: st, backend: cfg.Backend, bootID: cfg.BootID, interval: cfg.Interval,
		allocs: map[string]*alloc{}, gone: map[string]model.ActualAlloc{}, kick: make(chan struct{}, 1), dead: map[int]time.Time{}}
	fail := func(err error) (*Agent, error) {
		st.close()
		return nil, err
	}
	if a.bootID == "" {
		a.bootID = bootID()
	}
	var fresh bool
	if a.uuid, a.epoch, fresh, err = st.identity(a.bootID); err != nil {
		return fail(err)
	}
	a.log = cfg.Logger.With("node", cfg.NodeID, "epoch", a.epoch)
	if a.inv, err = a.backend.Inventory(); err != nil {
		return fail(fmt.Errorf("GPU discovery (%s): %w", a.backend.Name(), err))
	}
	var kept map[int]bool
	if !fresh {
		kept = a.adopt()
	}
	a.stopLeftovers(fresh, kept)
	running := map[string]bool{}
	for _, p := range a.allocs {
		if p.ctr != "" && !p.exited() {
			running[p.ctr] = true
		}
	}
	a.removeLeftoverContainers(running)
	if fresh {
		a.prev = a.previous()
	}
	if cfg.Model != "" {
		a.inv.Model = cfg.Model
	}
	if cfg.Cgroups {
		if a.cg, err = setupCgroups(cfg.CgroupRoot); err != nil {
			a.log.Warn("allocations run without cpu and memory limits", "why", err.Error())
		}
	}
	for _, s := range cfg.Servers {
		a.clients = append(a.clients, client.New(s, cfg.Token))
	}
	a.log.Info("agent started", "gpus", len(a.inv.Devices), "model", a.inv.Model, "backend", a.backend.Name(),
		"boot_id", a.bootID, "node_uuid", a.uuid, "new_epoch", fresh, "adopted", len(a.allocs), "cgroups", a.cg != nil)
	return a, nil
}

// Epoch is this incarnation's boot epoch.
func (a *Agent) Epoch() uint64 { return a.epoch }

// Fence is the highest fence the agent has accepted orders under.
func (a *Agent) Fence() int64 { return a.fence.Load() }

// Counts says how many answers were acted on and how many were refused.
func (a *Agent) Counts() (accepted, rejected int64) { return a.accepted.Load(), a.rejected.Load() }

// Close releases the state directory and the GPU library. Running work is
// left alone.
func (a *Agent) Close() error {
	err := a.backend.Close()
	if cerr := a.state.close(); err == nil {
		err = cerr
	}
	return err
}

// Run heartbeats until ctx ends. A failed heartbeat changes nothing on the
// node; the agent retries with backoff, keeping every allocation running.
func (a *Agent) Run(ctx context.Context) error {
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		a.pollLogs(ctx)
	}()
	defer func() { <-polled }()
	failures := 0
	for {
		rep := a.report()
		o, err := a.send(ctx, rep)
		if ctx.Err() != nil {
			return nil
		}
		wait := a.interval
		switch {
		case err != nil:
			failures++
			wait = a.backoff(failures)
			if failures == 1 || failures%10 == 0 {
				a.log.Warn("control plane unreachable: work keeps running", "failures", failures, "retry_in", wait, "err", err)
			}
		default:
			if failures > 0 {
				a.log.Info("control plane reachable again", "after_failures", failures)
			}
			failures = 0
			if err := a.check(o); err != nil {
				a.rejected.Add(1)
				a.log.Warn("orders ignored", "why", err.Error())
				break
			}
			refused, _ := a.sift(&o)
			a.setRefused(refused)
			a.accepted.Add(1)
			a.fence.Store(o.Fence)
			a.leader.Store(a.clients[a.cur])
			a.faults = a.faults[len(rep.Faults):]
			a.prev = nil
			for _, srv := range o.Servers {
				if u, err := url.Parse(srv); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
					a.server(srv)
				}
			}
			if o.HeartbeatInterval > 0 {
				a.interval = o.HeartbeatInterval
				wait = o.HeartbeatInterval
			}
			a.converge(o)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		case <-a.kick:
			// Something changed (a process exited): say so now, but
			// not more often than every 50 ms.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// backoff doubles from a fifth of the interval up to one interval, with
// jitter so a fleet does not retry in step. It never waits longer than a
// heartbeat: every server has already been tried once before it applies,
// and a fleet retrying once an interval is no more load than the fleet
// heartbeating, while a longer wait is how agents came back 15-50 s
// after a failover.
func (a *Agent) backoff(failures int) time.Duration {
	d := a.interval / 5
	for i := 1; i < failures && d < a.interval; i++ {
		d *= 2
	}
	d = min(d, a.interval)
	return d/2 + rand.N(d/2+1)
}

func (a *Agent) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// send posts one report, trying each server at most once: the current
// one, then the leader a follower names (unless that one just failed to
// answer), then the next address that has not just failed. Each try is
// bounded by one interval (at least a second), so a leader that is
// paused rather than dead costs one interval, not the client's timeout.
func (a *Agent) send(ctx context.Context, rep model.NodeReport) (model.NodeOrders, error) {
	tried := map[int]bool{}
	var last error
	for len(tried) < len(a.clients) {
		tried[a.cur] = true
		tctx, cancel := context.WithTimeout(ctx, min(max(a.interval, time.Second), 10*time.Second))
		o, err := a.clients[a.cur].Heartbeat(tctx, rep)
		cancel()
		if err == nil {
			delete(a.dead, a.cur)
			return o, nil
		}
		last = err
		if ctx.Err() != nil {
			return o, err
		}
		var se *client.StatusError
		if !errors.As(err, &se) {
			a.dead[a.cur] = time.Now() // no answer at all
		} else if se.Status < 500 && se.Body.Leader == "" {
			return o, err // refused on its merits: another server would say the same
		}
		if se != nil && se.Body.Leader != "" {
			if i := a.server(se.Body.Leader); !tried[i] && !a.recentlyDead(i) {
				a.cur = i
				continue
			}
		}
		next := -1
		for k := 1; k <= len(a.clients); k++ {
			i := (a.cur + k) % len(a.clients)
			if !tried[i] && (next < 0 || a.recentlyDead(next) && !a.recentlyDead(i)) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		a.cur = next
	}
	return model.NodeOrders{}, last
}

// server is the index of a server address (a leader hint is its URL; the
// agent's list may hold bare host:port addresses), added when unknown.
func (a *Agent) server(hint string) int {
	for i, s := range a.cfg.Servers {
		if hostOf(s) == hostOf(hint) {
			return i
		}
	}
	a.cfg.Servers = append(a.cfg.Servers, hint)
	a.clients = append(a.clients, client.New(hint, a.cfg.Token))
	a.log.Info("learned of a server to fail over to", "server", hint)
	return len(a.clients) - 1
}

// hostOf is an address's host:port, whether given as a URL or bare.
func hostOf(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// recentlyDead says server i did not answer at all within the last few
// intervals: a leader hint naming it is stale.
func (a *Agent) recentlyDead(i int) bool {
	t, ok := a.dead[i]
	return ok && time.Since(t) < 3*a.interval
}

// report is the node as it is now.
func (a *Agent) report() model.NodeReport {
	inv, err := a.backend.Inventory()
	switch {
	case err != nil && !a.nvmlDown:
		a.nvmlDown = true
		a.faults = append(a.faults, model.GPUFault{GPU: -1, Kind: "nvml", Message: err.Error()})
		a.log.Error("GPU management library failing: reporting every GPU unhealthy", "err", err)
	case err == nil:
		if a.nvmlDown {
			a.log.Info("GPU management library answering again")
		}
		a.nvmlDown = false
		if a.cfg.Model != "" {
			inv.Model = a.cfg.Model
		}
		a.inv = inv
	}
	for _, f := range a.backend.Faults() {
		a.faults = append(a.faults, f)
		if model.ClassifyFault(f) == model.FaultApp {
			a.tellJobs(f)
		}
	}
	rep := model.NodeReport{NodeID: a.cfg.NodeID, BootEpoch: a.epoch, BootID: a.bootID, NodeUUID: a.uuid, Previous: a.prev,
		Pod: a.cfg.Pod, Pool: a.cfg.Pool,
		Model: a.inv.Model, GPUs: len(a.inv.Devices), GPUUUIDs: a.inv.UUIDs(), Links: a.inv.Links, MIG: a.inv.MIGLayout(), MIGProfiles: a.inv.MIGProfiles(),
		CPUMilli: a.cfg.CPUMilli, MemoryMiB: a.cfg.MemoryMiB, Fence: a.fence.Load(),
		Faults: append([]model.GPUFault(nil), a.faults...)}
	if rep.CPUMilli == 0 {
		rep.CPUMilli = int64(runtime.NumCPU()) * 1000
	}
	if rep.MemoryMiB == 0 {
		rep.MemoryMiB = hostMemoryMiB()
	}
	rep.Allocations = a.Allocations()
	return rep
}

// tellJobs writes an application-level GPU error into the logs of the
// allocations using that GPU: the job's own error, so no quarantine.
func (a *Agent) tellJobs(f model.GPUFault) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.allocs {
		if f.GPU >= 0 && p.gpus.Has(f.GPU) {
			p.note("XID %d on GPU %d (an application error, reported to the scheduler): %s", f.XID, f.GPU, f.Message)
		}
	}
}

// Allocations is what actually runs here, by id.
func (a *Agent) Allocations() []model.ActualAlloc {
	a.mu.Lock()
	out := make([]model.ActualAlloc, 0, len(a.allocs)+len(a.refused))
	for _, p := range a.allocs {
		out = append(out, p.actual())
	}
	for id, why := range a.refused {
		if a.allocs[id] == nil {
			out = append(out, model.ActualAlloc{ID: id, State: model.ActualExited, ExitCode: 126, Error: why})
		}
	}
	a.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// setRefused records the allocations the last orders could not be acted
// on for. One that already runs here is left running as it is: its
// order went bad, not the work.
func (a *Agent) setRefused(refused map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, why := range refused {
		if _, known := a.refused[id]; !known {
			a.log.Warn("allocation refused: the rest of the orders are carried out", "alloc", id, "why", why,
				"running", a.allocs[id] != nil)
		}
	}
	a.refused = refused
}

// converge makes the node match accepted orders.
func (a *Agent) converge(o model.NodeOrders) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	want := make(map[string]bool, len(o.Allocations)+len(a.refused))
	for id := range a.refused {
		want[id] = true // refused, not unwanted: what runs keeps running
	}
	for _, d := range o.Allocations {
		want[d.ID] = true
		p := a.allocs[d.ID]
		if p == nil {
			if g, ok := a.gone[d.ID]; ok {
				// Released once already: never start an id twice; say
				// again that it exited.
				p = newAlloc(d.ID, a.state.allocDir(d.ID), d.GPUs, a.log, a.poke)
				p.state, p.exitCode, p.killed, p.checkpoint = model.ActualExited, g.ExitCode, g.Killed, g.Checkpoint
				close(p.done)
				a.allocs[d.ID] = p
				continue
			}
			if d.Stop || d.Kill {
				// Stopped before it started here: nothing to stop.
				p = newAlloc(d.ID, a.state.allocDir(d.ID), d.GPUs, a.log, a.poke)
				p.state = model.ActualExited
				close(p.done)
				a.allocs[d.ID] = p
				continue
			}
			if busy := a.busyLocked(d.GPUMilli); busy&d.GPUs != 0 {
				// Its GPUs are still held by a process on the way out;
				// start once they are free.
				a.log.Info("allocation waits for its GPUs", "alloc", d.ID, "gpus", (busy & d.GPUs).String())
				continue
			}
			if _, err := a.migFor(d); errors.Is(err, errMIGBusy) {
				a.log.Info("share waits for a MIG instance", "alloc", d.ID, "gpus", d.GPUs.String(), "milli", d.GPUMilli)
				continue
			}
			a.allocs[d.ID] = a.launch(d)
			continue
		}
		if d.JobGPUs > 0 && !d.Stop && !d.Kill {
			p.resize(d.JobGPUs)
		}
		switch {
		case d.Kill:
			p.kill("the control plane says the deadline passed")
		case d.Stop:
			deadline := d.StopDeadline
			if deadline.IsZero() {
				deadline = now.Add(a.cfg.OrphanGrace)
			}
			p.stop(deadline, "stop ordered")
		}
	}
	for id, p := range a.allocs {
		if want[id] {
			continue
		}
		if p.exited() {
			// The control plane has the exit and has released it.
			a.gone[id] = p.actual()
			markReleased(p.dir)
			delete(a.allocs, id)
			continue
		}
		p.stop(now.Add(a.cfg.OrphanGrace), fmt.Sprintf("the control plane (fence %d) does not list it", o.Fence))
	}
	for id := range a.gone {
		if len(a.gone) <= 4096 {
			break
		}
		delete(a.gone, id)
	}
}

// busyLocked is the GPUs held by processes not yet gone. For a share,
// GPUs held only by other shares are not busy: shares sum to at most one
// GPU by the control plane's accounting.
func (a *Agent) busyLocked(milli int) model.GPUMask {
	var m model.GPUMask
	for _, p := range a.allocs {
		if p.exited() || milli > 0 && p.milli > 0 {
			continue
		}
		m |= p.gpus
	}
	return m
}

// StopAll stops every allocation with the given grace and waits until all
// are gone: for `berth dev` shutting down and for tests. It does not tell
// the control plane; the next heartbeat (or the next epoch) does.
func (a *Agent) StopAll(grace time.Duration) {
	a.mu.Lock()
	var all []*alloc
	for _, p := range a.allocs {
		all = append(all, p)
	}
	a.mu.Unlock()
	deadline := time.Now().Add(grace)
	for _, p := range all {
		p.mu.Lock()
		p.agentStop = p.state != model.ActualExited
		p.mu.Unlock()
		p.stop(deadline, "agent stopping all work")
	}
	for _, p := range all {
		<-p.done
	}
}

// hostMemoryMiB reads MemTotal from /proc/meminfo.
func hostMemoryMiB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb >> 10
			}
		}
	}
	return 0
}
