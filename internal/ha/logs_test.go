package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLogsFromAnyServer reads a running job's log through every server,
// followers forwarding to the leader, and again after the leader is
// killed: the agent's log poll follows the new leader. The dashboard's
// history taken under the old leader is still there under the new.
func TestLogsFromAnyServer(t *testing.T) {
	c, _, acc, _, _ := steady(t)
	read := func(addr string) error {
		st, body, h, err := request(addr, c.admin, http.MethodGet, "/v1/jobs/"+acc.JobID+"/logs?tail=1", nil)
		switch {
		case err != nil:
			return err
		case st != 200:
			return fmt.Errorf("%d %s", st, body)
		case !strings.HasPrefix(string(body), "step ") || strings.Count(string(body), "\n") != 1:
			return fmt.Errorf("tail=1 answered %q", body)
		case h.Get("Berth-Node") == "":
			return fmt.Errorf("no Berth-Node header")
		}
		return nil
	}
	for _, m := range c.members {
		c.eventually("log through "+m.name, 20*time.Second, func() error { return read(m.api) })
	}
	samples := func(addr string) ([]string, error) {
		st, body, _, err := request(addr, c.admin, http.MethodGet, "/v1/history?since=1h", nil)
		if err != nil || st != 200 {
			return nil, fmt.Errorf("%d %s %v", st, body, err)
		}
		var h struct{ Samples []struct{ At string } }
		if err := json.Unmarshal(body, &h); err != nil {
			return nil, err
		}
		var at []string
		for _, s := range h.Samples {
			at = append(at, s.At)
		}
		return at, nil
	}
	leader, _, _ := c.waitLeader(nil, 30*time.Second)
	var before []string
	c.eventually("a history sample", 20*time.Second, func() error {
		var err error
		if before, err = samples(leader.api); err == nil && len(before) == 0 {
			err = fmt.Errorf("none yet")
		}
		return err
	})
	c.kill(leader)
	c.waitLeader(leader, 30*time.Second)
	for _, m := range c.alive() {
		c.eventually("log through "+m.name+" after the leader died", 30*time.Second, func() error { return read(m.api) })
		after, err := samples(m.api)
		if err != nil || len(after) == 0 || after[0] != before[0] {
			t.Errorf("history through %s after the leader died: %v %v, before %v", m.name, after, err, before)
		}
	}
}
