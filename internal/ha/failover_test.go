package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// TestFollowersForwardAndRead: three servers, one leader; a write sent to
// a follower is made by the leader under its fence; a read from any
// follower sees it at once; /readyz says who leads.
func TestFollowersForwardAndRead(t *testing.T) {
	c := newCluster(t)
	leader, fence, _ := c.waitLeader(nil, 30*time.Second)
	for _, m := range c.members {
		if m == leader {
			continue
		}
		st, body, h, err := request(m.api, c.admin, http.MethodPost, "/v1/jobs", api.JobRequest{Name: "via-" + m.name, Team: "t", GPUs: 1, Topology: "node", Command: sleeper})
		if err != nil || st != http.StatusAccepted {
			t.Fatalf("submit via follower %s: %d %s %v", m.name, st, body, err)
		}
		if h.Get("Berth-Served-By") != leader.url() || h.Get("Berth-Fence") != strconv.FormatInt(fence, 10) {
			t.Fatalf("write via %s served by %q under fence %q; leader %s has fence %d", m.name, h.Get("Berth-Served-By"), h.Get("Berth-Fence"), leader.url(), fence)
		}
		var acc api.JobAccepted
		json.Unmarshal(body, &acc)
		for _, o := range c.members {
			st, body, _, err := request(o.api, c.admin, http.MethodGet, "/v1/jobs/"+acc.JobID, nil)
			if err != nil || st != 200 {
				t.Fatalf("read %s from %s right after the write: %d %s %v", acc.JobID, o.name, st, body, err)
			}
		}
		st, body, _, _ = request(m.api, "", http.MethodGet, "/readyz", nil)
		var ready struct {
			Role, Leader string
		}
		json.Unmarshal(body, &ready)
		if st != 200 || ready.Role != "follower" || ready.Leader != leader.url() {
			t.Fatalf("follower %s readyz: %d %s", m.name, st, body)
		}
	}
}

// TestKillLeaderUnderLoad: kill -9 the leader while clients submit and
// agents heartbeat. A new leader within TTL + 2 s; every acknowledged
// submit is in the table; no GPU bound twice; the running workloads are
// the same processes throughout.
func TestKillLeaderUnderLoad(t *testing.T) {
	c := newCluster(t)
	f := c.startFleet("n1", "n2")
	type run struct {
		job   string
		alloc model.Allocation
		pid   int
	}
	var runs []run
	for i := range 2 {
		acc, err := c.submit(longJob(fmt.Sprintf("long-%d", i), 4), fmt.Sprintf("long-%d", i), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		a, pid := c.running(f, acc.JobID)
		runs = append(runs, run{acc.JobID, a, pid})
	}
	old, oldFence, _ := c.waitLeader(nil, 30*time.Second)

	// Clients: each submits with its own keys, retrying a key until it is
	// acknowledged; only acknowledged submits count.
	var mu sync.Mutex
	acked := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				req := api.JobRequest{Name: key, Team: "t", GPUs: 1, Topology: "node", Command: sleeper}
				if acc, err := c.submit(req, key, 15*time.Second); err == nil {
					mu.Lock()
					acked[key] = acc.JobID
					mu.Unlock()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	killed := time.Now()
	c.kill(old)
	leader, fence, _ := c.waitLeader(old, ttl+10*time.Second)
	took := time.Since(killed)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("new leader %s (fence %d → %d) %v after kill -9; %d submits acknowledged", leader.name, oldFence, fence, took.Round(time.Millisecond), len(acked))
	if took > ttl+2*time.Second {
		t.Errorf("new leader after %v, want within TTL (%v) + 2 s", took, ttl)
	}
	if fence <= oldFence {
		t.Errorf("fence %d after %d", fence, oldFence)
	}
	report(t, "kill -9 leader", took, len(acked))
	for key, id := range acked {
		j, err := c.job(id)
		if err != nil || j.Name != key {
			t.Errorf("acknowledged submit %s (%s) lost: %v", key, id, err)
		}
	}
	c.noDoubleBinding()
	for _, r := range runs {
		j, err := c.job(r.job)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != model.JobRunning || len(j.Allocations) != 1 || j.Allocations[0].ID != r.alloc.ID || j.PreemptCount != 0 {
			t.Errorf("%s after failover: %s %v, want still %s", r.job, j.State, j.Allocations, r.alloc.ID)
		}
		if !alive(r.pid) {
			t.Errorf("%s's process %d was restarted or killed", r.job, r.pid)
		}
	}
	for id, a := range f.agents {
		if a.Fence() != fence {
			c.eventually("agent "+id+" on the new fence", 10*time.Second, func() error {
				if a.Fence() != fence {
					return fmt.Errorf("agent fence %d, leader %d", a.Fence(), fence)
				}
				return nil
			})
		}
	}
}
