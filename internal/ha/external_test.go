package ha

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/berthsched/berth/internal/api"
)

// etcdCluster is three real etcd members, run in the test process: the
// external etcd cluster a fleet may already operate.
func etcdCluster(t *testing.T) ([]func(), []string) {
	t.Helper()
	type urls struct{ client, peer string }
	var us []urls
	var initial []string
	for i := range 3 {
		u := urls{"http://" + freePort(t), "http://" + freePort(t)}
		us = append(us, u)
		initial = append(initial, fmt.Sprintf("e%d=%s", i, u.peer))
	}
	var members []*embed.Etcd
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	root := t.TempDir()
	for i, u := range us {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := embed.NewConfig()
			cfg.Name, cfg.Dir = fmt.Sprintf("e%d", i), filepath.Join(root, fmt.Sprintf("e%d", i))
			cfg.Logger, cfg.LogLevel = "zap", "error"
			cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
			cfg.MaxTxnOps, cfg.MaxRequestBytes = 1<<20, 64<<20 // as docs/operations.md asks
			cu, _ := url.Parse(u.client)
			pu, _ := url.Parse(u.peer)
			cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
			cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
			cfg.InitialCluster = strings.Join(initial, ",")
			e, err := embed.StartEtcd(cfg)
			if err != nil {
				errs <- err
				return
			}
			select {
			case <-e.Server.ReadyNotify():
			case <-time.After(60 * time.Second):
				errs <- fmt.Errorf("etcd member %d not ready", i)
				return
			}
			mu.Lock()
			members = append(members, e)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	// Every member that started is closed at cleanup, before the
	// temporary directory goes, even when another failed: an etcd left
	// running on a removed directory logs a fatal error, and its logger
	// exits the whole test process (taking every other test's cleanup,
	// and the servers they started, with it).
	var closers []func()
	for _, e := range members {
		var once sync.Once
		stop := func() { once.Do(e.Close) }
		closers = append(closers, stop)
		t.Cleanup(stop)
	}
	for err := range errs {
		t.Fatal(err)
	}
	var endpoints []string
	for _, u := range us {
		endpoints = append(endpoints, u.client)
	}
	return closers, endpoints
}

// TestExternalEtcd: two berth servers on an external three-member etcd
// cluster. One leads, the other forwards; losing an etcd member changes
// nothing; killing the leading server hands over within TTL + 2 s.
func TestExternalEtcd(t *testing.T) {
	members, endpoints := etcdCluster(t)
	c := &cluster{t: t}
	root := t.TempDir()
	for i := range 2 {
		m := &member{name: fmt.Sprintf("x%d", i), api: freePort(t), dir: filepath.Join(root, fmt.Sprintf("x%d", i))}
		os.MkdirAll(m.dir, 0o700)
		log, _ := os.Create(filepath.Join(m.dir, "server.log"))
		m.log = log
		m.cmd = exec.Command(berth, "server", "--listen", m.api, "--data-dir", m.dir, "--etcd-endpoints", strings.Join(endpoints, ","),
			"--election-ttl", ttl.String(), "--heartbeat-interval", "200ms")
		m.cmd.Stdout, m.cmd.Stderr = log, log
		// Killed with the test process, however it ends.
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m.done = make(chan struct{})
		go func(m *member) { m.cmd.Wait(); close(m.done) }(m)
		c.members = append(c.members, m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
	})
	c.waitAdminToken(60 * time.Second)
	leader, fence, _ := c.waitLeader(nil, 30*time.Second)
	var follower *member
	for _, m := range c.members {
		if m != leader {
			follower = m
		}
	}
	st, body, h, err := request(follower.api, c.admin, http.MethodPost, "/v1/jobs", api.JobRequest{Name: "ext", Team: "t", GPUs: 1, Topology: "node", Command: sleeper})
	if err != nil || st != http.StatusAccepted || h.Get("Berth-Served-By") != leader.url() {
		t.Fatalf("submit via the follower: %d %s %v (served by %q)", st, body, err, h.Get("Berth-Served-By"))
	}
	// Lose one etcd member (not the raft leader's quorum).
	members[0]()
	if _, err := c.submit(api.JobRequest{Name: "ext-2", Team: "t", GPUs: 1, Topology: "node", Command: sleeper}, "ext-2", 30*time.Second); err != nil {
		t.Fatalf("with one etcd member down: %v", err)
	}
	killed := time.Now()
	c.kill(leader)
	next, nextFence, _ := c.waitLeader(leader, ttl+10*time.Second)
	took := time.Since(killed)
	t.Logf("external etcd: %s took over from %s in %v (fence %d → %d)", next.name, leader.name, took.Round(time.Millisecond), fence, nextFence)
	report(t, "kill -9 leader, external etcd", took, 0)
	if took > ttl+2*time.Second || nextFence <= fence {
		t.Fatalf("takeover after %v with fence %d → %d", took, fence, nextFence)
	}
	if _, err := c.submit(api.JobRequest{Name: "ext-3", Team: "t", GPUs: 1, Topology: "node", Command: sleeper}, "ext-3", 30*time.Second); err != nil {
		t.Fatalf("after takeover: %v", err)
	}
}
