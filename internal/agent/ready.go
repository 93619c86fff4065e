package agent

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// readyProbe is how often a readiness check runs, and how long one may take.
const (
	readyEvery   = 250 * time.Millisecond
	readyTimeout = 2 * time.Second
)

// watchReady runs the workload's readiness check until the allocation
// exits (R4): an HTTP GET that answers 2xx or 3xx, or a command that exits
// 0. A path ("/healthz") is asked of the address the workload wrote to
// $BERTH_ALLOC_DIR/addr. The result is reported in every heartbeat; the
// control plane counts a replica as capacity, and drains the old copy of a
// relocated one, only once it is ready.
func (p *alloc) watchReady(r *model.Readiness, env []string) {
	client := &http.Client{Timeout: readyTimeout}
	t := time.NewTicker(readyEvery)
	defer t.Stop()
	for {
		ok := p.probe(r, env, client)
		p.mu.Lock()
		flipped := p.ready != ok
		p.ready = ok
		p.mu.Unlock()
		if flipped {
			p.log.Info("readiness", "ready", ok)
			p.changed()
		}
		select {
		case <-p.done:
			return
		case <-t.C:
		}
	}
}

func (p *alloc) probe(r *model.Readiness, env []string, client *http.Client) bool {
	if len(r.Command) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, r.Command[0], r.Command[1:]...)
		if p.ctr != "" {
			// Inside the container, where the workload's files are.
			cmd = exec.CommandContext(ctx, p.ctrCfg.Podman, p.ctrCfg.global(append([]string{"exec", p.ctr}, r.Command...))...)
		}
		cmd.Env, cmd.Dir = env, p.dir
		return cmd.Run() == nil
	}
	url := r.HTTP
	if strings.HasPrefix(url, "/") {
		b, err := os.ReadFile(filepath.Join(p.dir, "addr"))
		if err != nil || len(b) > 256 {
			return false // not listening yet
		}
		url = "http://" + strings.TrimSpace(string(b)) + url
	}
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}
