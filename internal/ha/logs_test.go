package ha

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLogsFromAnyServer reads a running job's log through every server,
// followers forwarding to the leader, and again after the leader is
// killed: the agent's log poll follows the new leader.
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
	leader, _, _ := c.waitLeader(nil, 30*time.Second)
	c.kill(leader)
	c.waitLeader(leader, 30*time.Second)
	for _, m := range c.alive() {
		c.eventually("log through "+m.name+" after the leader died", 30*time.Second, func() error { return read(m.api) })
	}
}
