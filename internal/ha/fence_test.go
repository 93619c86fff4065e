package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// TestPausedLeaderIsFenced: SIGSTOP the leader for 2× TTL, SIGCONT it, and
// at once send it writes and agent heartbeats. None is accepted under its
// old fence: each is refused or reaches the new leader. The agents never
// act on a lower fence and their work keeps running.
func TestPausedLeaderIsFenced(t *testing.T) {
	c, f, acc, alloc, pid := steady(t)
	old, oldFence, _ := c.waitLeader(nil, 30*time.Second)
	probe := c.tokenFor("agent:probe")

	c.signal(old, syscall.SIGSTOP)
	stopped := time.Now()
	_, newFence, took := c.waitLeader(old, ttl+10*time.Second)
	time.Sleep(2*ttl - time.Since(stopped))
	report(t, "SIGSTOP leader: new leader", took, 0)
	c.signal(old, syscall.SIGCONT)

	// The paused leader's first moments awake: it may still believe it
	// leads. Everything it is asked to do now must fail or go through the
	// new leader.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var attempts, accepted, staleAccepted, staleOrders int
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				st, _, h, err := request(old.api, c.admin, http.MethodPost, "/v1/jobs",
					api.JobRequest{Name: fmt.Sprintf("after-%d-%d", w, i), Team: "t", GPUs: 1, Topology: "node", Command: sleeper})
				mu.Lock()
				attempts++
				if err == nil && st < 300 {
					accepted++
					if h.Get("Berth-Fence") != strconv.FormatInt(newFence, 10) {
						staleAccepted++
					}
				}
				mu.Unlock()
				rep := model.NodeReport{NodeID: "probe", BootEpoch: 1, Pod: "p9", Model: "H100", GPUs: 8, Fence: newFence}
				st, body, _, err := request(old.api, probe, http.MethodPost, "/v1/agent/heartbeat", rep)
				mu.Lock()
				attempts++
				if err == nil && st == 200 {
					var o model.NodeOrders
					json.Unmarshal(body, &o)
					if o.Fence < newFence {
						staleOrders++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("after SIGCONT: %d requests to the old leader (fence %d), %d writes accepted, all via the new leader (fence %d)", attempts, oldFence, accepted, newFence)
	if staleAccepted != 0 || staleOrders != 0 {
		t.Fatalf("the paused leader accepted %d writes and gave %d orders under its old fence", staleAccepted, staleOrders)
	}
	c.noDoubleBinding()
	j, err := c.job(acc.JobID)
	if err != nil || j.State != model.JobRunning || j.Allocations[0].ID != alloc.ID || !alive(pid) {
		t.Fatalf("the running job was disturbed: %v %+v alive=%v", err, j.Allocations, alive(pid))
	}
	for id, a := range f.agents {
		if a.Fence() < newFence {
			c.eventually("agent "+id+" follows the new fence", 10*time.Second, func() error {
				if a.Fence() < newFence {
					return fmt.Errorf("fence %d", a.Fence())
				}
				return nil
			})
		}
	}
	// And the old leader, awake, is a follower now.
	c.eventually("the old leader follows", 10*time.Second, func() error {
		st, body, _, err := request(old.api, "", http.MethodGet, "/readyz", nil)
		var r struct{ Role string }
		json.Unmarshal(body, &r)
		if err != nil || st != 200 || r.Role != "follower" {
			return fmt.Errorf("%d %s %v", st, body, err)
		}
		return nil
	})
}
