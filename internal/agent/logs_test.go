package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// TestJobLogsThroughTheServer follows a running job's output from its
// node through the server until it ends, then reads it again after the
// job finished: all of it, its tail, and what only its team may see.
func TestJobLogsThroughTheServer(t *testing.T) {
	f := newFleet(t)
	f.startAgent("n1", "")
	ctx := context.Background()
	id := f.submit(api.JobRequest{Name: "logs", GPUs: 1}, "train", "--steps", "30", "--step-time", "60ms")
	f.running(f.agents["n1"], id)

	var followed bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- f.api.Stream(ctx, "/v1/jobs/"+id+"/logs?follow=true", &followed) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("follow did not end with the job")
	}
	j := f.waitState(id, model.JobCompleted)
	want := readLog(t, f.agents["n1"], j.Run().Ran[0].ID, "stdout.log")
	if !strings.Contains(want, "done: 30 steps") {
		t.Fatalf("the workload's own log is not what the test expects: %q", want)
	}
	if followed.String() != want {
		t.Fatalf("followed log differs from the node's file:\n got %q\nwant %q", followed.String(), want)
	}

	read := func(tok *client.Client, q string) (string, error) {
		var b bytes.Buffer
		err := tok.Stream(ctx, "/v1/jobs/"+id+"/logs"+q, &b)
		return b.String(), err
	}
	if got, err := read(f.api, ""); err != nil || got != want {
		t.Fatalf("log after the job ended: %q, %v", got, err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(want, "\n"), "\n")
	if got, err := read(f.api, "?tail=2"); err != nil || got != strings.Join(lines[len(lines)-2:], "")+"\n" {
		t.Fatalf("tail=2: %q, %v", got, err)
	}
	if got, err := read(f.api, "?since="+time.Now().Add(time.Minute).UTC().Format(time.RFC3339)); err != nil || got != "" {
		t.Fatalf("since a time after the last write: %q, %v", got, err)
	}
	if got, err := read(f.api, "?since=1h"); err != nil || got != want {
		t.Fatalf("since=1h: %q, %v", got, err)
	}
	if got, err := read(f.api, "?stream=stderr"); err != nil || got != "" {
		t.Fatalf("stderr of a workload that wrote none: %q, %v", got, err)
	}

	status := func(err error) int {
		var se *client.StatusError
		if errors.As(err, &se) {
			return se.Status
		}
		return 0
	}
	if _, err := read(f.api, "?tail=-1"); status(err) != 400 || !strings.Contains(err.Error(), "tail") {
		t.Fatalf("tail=-1: %v", err)
	}
	if _, err := read(f.api, "?replica=1"); status(err) != 400 || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("replica=1 of a one-node job: %v", err)
	}
	for role, code := range map[string]int{"team:t": 200, "team:u": 404} {
		tok, err := f.api.CreateToken(ctx, role, "reader-"+strings.TrimPrefix(role, "team:"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := read(client.New(f.listen, tok.Secret), "")
		if code == 200 && (err != nil || got != want) || code != 200 && status(err) != code {
			t.Fatalf("%s reading the log: %v (want %d)", role, err, code)
		}
	}
}

// TestLogOfAStoppedAgent says who did not answer rather than hang.
func TestLogOfAStoppedAgent(t *testing.T) {
	f := newFleet(t)
	f.startAgent("n1", "")
	id := f.submit(api.JobRequest{Name: "logs", GPUs: 1}, "train", "--steps", "1000", "--step-time", "50ms")
	f.running(f.agents["n1"], id)
	f.stopAgent("n1", false)
	t0 := time.Now()
	err := f.api.Stream(context.Background(), "/v1/jobs/"+id+"/logs", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "n1 did not answer") {
		t.Fatalf("log from a node whose agent is down: %v", err)
	}
	if d := time.Since(t0); d > 3*logWaitForTest {
		t.Fatalf("the refusal took %v", d)
	}
}

// logWaitForTest is the server's wait for an agent (logAnswerWait).
const logWaitForTest = 10 * time.Second

// TestReadLog reads one allocation's files as the agent answers: from an
// offset, a tail of lines, past a rotation, and refusing names that are
// not allocation ids.
func TestReadLog(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{state: &stateDir{path: dir}, allocs: map[string]*alloc{}, cfg: Config{NodeID: "n1"}}
	ad := filepath.Join(dir, "allocs", "a-1")
	if err := os.MkdirAll(ad, 0o755); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&text, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(ad, "stdout.log"), []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c := a.readLog(model.LogRequest{Alloc: "a-1", Stream: "stdout", Offset: 0, Max: 10})
	if string(c.Data) != "line 1\nlin" || c.Offset != 0 || c.Size != int64(text.Len()) || !c.Done {
		t.Fatalf("first 10 bytes: %+v", c)
	}
	c = a.readLog(model.LogRequest{Alloc: "a-1", Stream: "stdout", Offset: -1, Tail: 3})
	if string(c.Data) != "line 48\nline 49\nline 50\n" {
		t.Fatalf("tail 3: %q", c.Data)
	}
	c = a.readLog(model.LogRequest{Alloc: "a-1", Stream: "stdout", Offset: -1, Tail: 500})
	if string(c.Data) != text.String() {
		t.Fatalf("a tail longer than the file: %q", c.Data)
	}
	c = a.readLog(model.LogRequest{Alloc: "a-1", Stream: "stdout", Offset: int64(text.Len()) + 100})
	if !c.Rotated || c.Offset != 0 || string(c.Data) != text.String() {
		t.Fatalf("an offset past a cut file: %+v", c)
	}
	for _, bad := range []model.LogRequest{{Alloc: "../a-1", Stream: "stdout"}, {Alloc: "..", Stream: "stdout"},
		{Alloc: "a-1", Stream: "../stdout"}, {Alloc: "a-2", Stream: "stdout"}} {
		if c := a.readLog(bad); c.Error == "" || len(c.Data) > 0 {
			t.Errorf("%+v: answered %+v", bad, c)
		}
	}
}

// TestSinceOffset finds where output written after a time starts from
// the per-second size samples.
func TestSinceOffset(t *testing.T) {
	p := newAlloc("a", "", 0, slog.New(slog.DiscardHandler), func() {})
	t0 := time.Unix(1000, 0)
	for i, size := range []int64{10, 10, 25, 40} {
		p.sample(0, size, t0.Add(time.Duration(i)*time.Second))
	}
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{{-time.Second, 0}, {0, 0}, {time.Second, 10}, {2 * time.Second, 10}, {3 * time.Second, 25}, {9 * time.Second, 40}} {
		if got, ok := p.sinceOffset(0, t0.Add(c.at)); !ok || got != c.want {
			t.Errorf("since t0%+v: %d, want %d", c.at, got, c.want)
		}
	}
	p.sample(0, 5, t0.Add(5*time.Second)) // cut at the cap: samples start over
	if got, _ := p.sinceOffset(0, t0); got != 0 {
		t.Errorf("after a rotation: %d", got)
	}
}

// TestSweepLogs removes released allocations past the retention only.
func TestSweepLogs(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{state: &stateDir{path: dir}, allocs: map[string]*alloc{}, cfg: Config{LogRetention: time.Hour}, log: slog.New(slog.DiscardHandler)}
	mk := func(id string, released bool, age time.Duration) string {
		d := filepath.Join(dir, "allocs", id)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "stdout.log"), []byte("x\n"), 0o644)
		if released {
			markReleased(d)
			old := time.Now().Add(-age)
			os.Chtimes(filepath.Join(d, releasedFile), old, old)
		}
		return d
	}
	old, fresh, running := mk("a-old", true, 2*time.Hour), mk("a-fresh", true, time.Minute), mk("a-run", false, 0)
	a.sweepLogs()
	for d, keep := range map[string]bool{old: false, fresh: true, running: true} {
		if _, err := os.Stat(d); (err == nil) != keep {
			t.Errorf("%s: kept %v, want %v", filepath.Base(d), err == nil, keep)
		}
	}
}

// TestDeploymentLogs reads a running replica's output by replica number.
func TestDeploymentLogs(t *testing.T) {
	f := newFleet(t)
	f.startAgent("n1", "")
	ctx := context.Background()
	one := 1
	req := api.DeploymentRequest{Name: "chat", Team: "t", MinReplicas: 1, MaxReplicas: 2, Desired: &one,
		ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"},
		Command:      []string{os.Args[0]}, Env: map[string]string{"BERTH_TEST_WORKLOAD": "serve"}}
	if err := f.api.Do(ctx, "POST", "/v1/deployments", req, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replica 0's log says where it serves", func() error {
		var b bytes.Buffer
		if err := f.api.Stream(ctx, "/v1/deployments/chat/logs?replica=0", &b); err != nil {
			return err
		}
		if !strings.HasPrefix(b.String(), "serving on http://127.0.0.1:") {
			return fmt.Errorf("log %q", b.String())
		}
		return nil
	})
	err := f.api.Stream(ctx, "/v1/deployments/chat/logs?replica=1", &bytes.Buffer{})
	var se *client.StatusError
	if !errors.As(err, &se) || se.Status != 400 || se.Body.Field != "replica" || !strings.Contains(se.Body.Message, "0") {
		t.Fatalf("a replica that does not run: %v", err)
	}
}
