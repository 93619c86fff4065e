package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/control"
	"gopkg.in/yaml.v3"
)

// tourBlock is the README's tour: the shell block after "In another
// terminal:", as written.
func tourBlock(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "In another terminal:\n\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("README: no shell block after \"In another terminal:\"")
	}
	// Commands: continuation lines joined, a for loop as one, comments
	// and blank lines dropped.
	var cmds []string
	var cur string
	loop := false
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "" {
			continue
		}
		cur += line + "\n"
		switch {
		case strings.HasPrefix(line, "for "):
			loop = true
		case loop && strings.TrimSpace(line) == "done":
			loop = false
		}
		if !loop && !strings.HasSuffix(line, "\\") {
			cmds = append(cmds, cur)
			cur = ""
		}
	}
	return cmds
}

// TestTourAsWritten runs the README's tour, command by command as the
// README writes them, against `berth dev --demo` (built from this tree,
// real agents, real processes), and checks each outcome its comments
// promise.
func TestTourAsWritten(t *testing.T) {
	home := t.TempDir()
	bin := filepath.Join(home, "berth")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	for _, k := range []string{"GOCACHE", "GOPATH", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dev := exec.CommandContext(ctx, bin, "dev", "--demo", "--listen", "127.0.0.1:0", "--heartbeat-interval", "500ms")
	dev.Dir, dev.Env = home, env
	logf, err := os.Create(filepath.Join(home, "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	dev.Stdout, dev.Stderr = logf, logf
	dev.Cancel = func() error { return dev.Process.Signal(os.Interrupt) }
	dev.WaitDelay = time.Minute
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		dev.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("berth dev's output (tail):\n%s", tail(string(b), 3000))
		}
	})
	// `berth dev` writes the CLI config when it is up.
	var cfg cliConfig
	waitFor(t, 2*time.Minute, "berth dev up", func() error {
		b, err := os.ReadFile(filepath.Join(home, ".config", "berth", "config.yaml"))
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(b, &cfg); err != nil || cfg.Token == "" {
			return fmt.Errorf("config %q: %v", b, err)
		}
		if b, _ := os.ReadFile(logf.Name()); !strings.Contains(string(b), "berth is running") {
			return fmt.Errorf("not running yet")
		}
		return nil
	})
	c := client.New(cfg.Server, cfg.Token)
	sh := func(cmd string) string {
		t.Helper()
		x := exec.Command("bash", "-ec", cmd)
		x.Dir, x.Env = home, env
		out, err := x.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	job := func(name string) api.Job {
		t.Helper()
		var l api.JobList
		if err := c.Do(ctx, http.MethodGet, "/v1/jobs", nil, &l); err != nil {
			t.Fatal(err)
		}
		for _, j := range l.Jobs {
			if j.Name == name {
				full, err := c.Job(ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				return full
			}
		}
		t.Fatalf("no job %s", name)
		return api.Job{}
	}
	checks := []struct {
		prefix string
		check  func(out string)
	}{
		{"./berth topology", func(out string) {
			mustHave(t, out, "largest_placeable", "pod-a", "pod-b", "pod-c")
		}},
		{"./berth job ls", func(out string) { mustHave(t, out, "pretrain-32", "finetune-8", "sweep-") }},
		{"./berth deploy ls", func(out string) { mustHave(t, out, "chat", "embed") }},
		{"for n in big-1 big-2", func(string) {
			waitFor(t, time.Minute, "big-1 on a whole pod, big-2 holding", func() error {
				b1, b2 := job("big-1"), job("big-2")
				if b1.State != "running" || len(b1.Allocations) != 8 {
					return fmt.Errorf("big-1 %s on %d nodes (%v)", b1.State, len(b1.Allocations), b1.PendingReason)
				}
				if b2.State != "pending" || b2.Reservation == nil || b2.Reservation.HeldGPUs == 0 {
					return fmt.Errorf("big-2 %s, reservation %+v, reason %+v", b2.State, b2.Reservation, b2.PendingReason)
				}
				var log strings.Builder
				if err := c.Stream(ctx, "/v1/jobs/"+b1.ID+"/logs?tail=3", &log); err != nil || strings.Count(log.String(), "\n") < 3 {
					return fmt.Errorf("big-1 has not written 3 lines yet: %q %v", log.String(), err)
				}
				return nil
			})
		}},
		{"./berth job show big-2", func(out string) {
			mustHave(t, out, "why pending", "reservation", "holds", "effective priority")
		}},
		{"./berth job logs big-1 --tail 3", func(out string) {
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.Contains(lines[2], "step ") {
				t.Fatalf("job logs --tail 3 printed %q", out)
			}
		}},
		{"./berth deploy create --name llm", func(out string) { mustHave(t, out, "deployment llm") }},
		{"./berth deploy scale llm 12", func(string) {
			waitFor(t, 90*time.Second, "llm past the budget: training preempted with its checkpoint, then a page", func() error {
				var l api.JobList
				if err := c.Do(ctx, http.MethodGet, "/v1/jobs", nil, &l); err != nil {
					return err
				}
				preempted := ""
				for _, j := range l.Jobs {
					if j.PreemptCount > 0 {
						full, err := c.Job(ctx, j.ID)
						if err == nil && full.Run().Restore != "" {
							preempted = j.Name
						}
					}
				}
				if preempted == "" {
					return fmt.Errorf("no training job preempted with a restore point yet")
				}
				var a control.AlertRecord
				if err := c.Do(ctx, http.MethodGet, "/v1/alerts/budget%2Fllm", nil, &a); err != nil {
					return fmt.Errorf("no page yet: %v", err)
				}
				if a.Page == nil || a.ResolvedAt != nil {
					return fmt.Errorf("alert %+v", a)
				}
				return nil
			})
		}},
		{"./berth alerts ls", func(out string) {
			mustHave(t, out, "budget/llm", "page", "raise_budget", "preempt", "accept_degraded", "GPU-h")
		}},
		{"./berth alerts act budget/llm accept_degraded", func(string) {
			var a control.AlertRecord
			if err := c.Do(ctx, http.MethodGet, "/v1/alerts/budget%2Fllm", nil, &a); err != nil || a.Choice == nil || a.Choice.Action != "accept_degraded" {
				t.Fatalf("after alerts act: %+v %v", a, err)
			}
		}},
		{"./berth job submit --name notebook", func(string) {
			waitFor(t, time.Minute, "the notebook's share runs", func() error {
				j := job("notebook")
				if j.State != "running" || len(j.Allocations) != 1 || j.Allocations[0].GPUMilli != 300 {
					return fmt.Errorf("notebook %s %+v %+v", j.State, j.Allocations, j.PendingReason)
				}
				return nil
			})
		}},
		{"./berth topology", func(out string) { mustHave(t, out, "shared GPUs", "largest share placeable") }},
		{"./berth agent inject", func(string) {
			waitFor(t, time.Minute, "GPU 2 of n003 quarantined", func() error {
				var n api.Node
				if err := c.Do(ctx, http.MethodGet, "/v1/nodes/n003", nil, &n); err != nil {
					return err
				}
				if n.QuarantinedGPUs&(1<<2) == 0 {
					return fmt.Errorf("n003 quarantined GPUs %s", n.QuarantinedGPUs)
				}
				return nil
			})
		}},
		{"./berth nodes ls", func(out string) {
			mustHave(t, out, "degraded (1 of 8 GPUs quarantined)")
		}},
		{"./berth usage --since 1h", func(out string) {
			mustHave(t, out, "TEAM", "RUNNING GPU-H", "QUEUE P90", "research")
		}},
	}
	cmds := tourBlock(t)
	seen := 0
	for _, cmd := range cmds {
		out := sh(cmd)
		matched := false
		for i := seen; i < len(checks) && !matched; i++ {
			if strings.HasPrefix(cmd, checks[i].prefix) {
				checks[i].check(out)
				seen, matched = i+1, true
			}
		}
		if !matched {
			t.Fatalf("the README's tour has a command this test does not check: %q (update both together)", cmd)
		}
	}
	if seen != len(checks) {
		t.Fatalf("the README's tour lost steps: checked %d of %d (next: %q)", seen, len(checks), checks[seen].prefix)
	}
}

func mustHave(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, limit, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
