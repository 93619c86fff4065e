package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// output is a goroutine-safe Out that can call back when a line appears.
type output struct {
	mu     sync.Mutex
	buf    strings.Builder
	onLine func(line string)
	seen   map[string]chan struct{}
}

func newOutput() *output { return &output{seen: map[string]chan struct{}{}} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.buf.Write(p)
	s := o.buf.String()
	for sub, ch := range o.seen {
		if strings.Contains(s, sub) {
			close(ch)
			delete(o.seen, sub)
		}
	}
	cb := o.onLine
	o.mu.Unlock()
	if cb != nil {
		for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			cb(l)
		}
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// when returns a channel closed once sub has been written.
func (o *output) when(sub string) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(o.buf.String(), sub) {
		close(ch)
	} else {
		o.seen[sub] = ch
	}
	return ch
}

// wait guards against a hang; it is not a speed check.
func wait[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// trainEnv isolates Train from the environment the tests run in.
func trainEnv(t *testing.T) (allocDir, ckDir string) {
	t.Helper()
	allocDir, ckDir = t.TempDir(), filepath.Join(t.TempDir(), "ck")
	t.Setenv("BERTH_ALLOC_DIR", allocDir)
	t.Setenv("BERTH_CHECKPOINT_DIR", ckDir)
	t.Setenv("BERTH_RESTORE", "")
	t.Setenv("BERTH_JOB_ID", "job-7")
	return allocDir, ckDir
}

var stepLine = regexp.MustCompile(`(?m)^step (\d+)/(\d+)$`)

func steps(t *testing.T, out string) []int {
	t.Helper()
	var got []int
	for _, m := range stepLine.FindAllStringSubmatch(out, -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	return got
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestTrainValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   TrainConfig
		field string
	}{
		{"steps 0", TrainConfig{Steps: 0, StepTime: time.Millisecond}, "--steps"},
		{"steps negative", TrainConfig{Steps: -3, StepTime: time.Millisecond}, "--steps"},
		{"step time 0", TrainConfig{Steps: 5}, "--step-time"},
		{"step time negative", TrainConfig{Steps: 5, StepTime: -time.Second}, "--step-time"},
		{"checkpoint every negative", TrainConfig{Steps: 5, StepTime: time.Millisecond, CheckpointEvery: -1}, "--checkpoint-every"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trainEnv(t)
			out := newOutput()
			tc.cfg.Out = out
			err := Train(make(chan struct{}), tc.cfg)
			if err == nil {
				t.Fatalf("Train(%+v) = nil, want an error naming %s", tc.cfg, tc.field)
			}
			if !strings.HasPrefix(err.Error(), tc.field+":") {
				t.Errorf("Train error %q does not start with %s:", err, tc.field)
			}
			if errors.Is(err, ErrPreempted) {
				t.Errorf("a config error is ErrPreempted")
			}
			if s := out.String(); s != "" {
				t.Errorf("Train wrote %q before failing validation", s)
			}
		})
	}
}

func TestTrainRunsToDone(t *testing.T) {
	allocDir, ckDir := trainEnv(t)
	out := newOutput()
	if err := Train(make(chan struct{}), TrainConfig{Steps: 5, StepTime: time.Millisecond, Out: out}); err != nil {
		t.Fatalf("Train = %v", err)
	}
	s := out.String()
	if !strings.Contains(s, "starting at step 0 of 5\n") {
		t.Errorf("output lacks the start line:\n%s", s)
	}
	if !strings.HasSuffix(s, "done: 5 steps\n") {
		t.Errorf("output does not end with done: 5 steps:\n%s", s)
	}
	if diff := cmp.Diff(seq(1, 5), steps(t, s)); diff != "" {
		t.Errorf("steps run (-want +got):\n%s", diff)
	}
	// No stop and no CheckpointEvery: no checkpoint.
	if _, err := os.Stat(filepath.Join(allocDir, "checkpoint")); !os.IsNotExist(err) {
		t.Errorf("checkpoint marker written by a run that was never stopped (stat: %v)", err)
	}
	if _, err := os.Stat(ckDir); !os.IsNotExist(err) {
		t.Errorf("checkpoint dir created by a run that was never stopped (stat: %v)", err)
	}
}

func readMarker(t *testing.T, allocDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(allocDir, "checkpoint"))
	if err != nil {
		t.Fatalf("checkpoint marker: %v", err)
	}
	if !strings.HasSuffix(string(b), "\n") {
		t.Errorf("checkpoint marker %q does not end in a newline", b)
	}
	return strings.TrimSpace(string(b))
}

func readCk(t *testing.T, path string) Checkpoint {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ck Checkpoint
	if err := json.Unmarshal(b, &ck); err != nil {
		t.Fatalf("checkpoint %s is not JSON: %v (%q)", path, err, b)
	}
	return ck
}

func TestTrainPreemptAndResume(t *testing.T) {
	const total = 20
	allocDir, ckDir := trainEnv(t)

	// First run: stop after step 3. The writer closes stop from inside
	// Train's own goroutine, so the run cannot get far past step 3.
	stop := make(chan struct{})
	var once sync.Once
	out1 := newOutput()
	out1.onLine = func(l string) {
		if l == fmt.Sprintf("step 3/%d", total) {
			once.Do(func() { close(stop) })
		}
	}
	err := Train(stop, TrainConfig{Steps: total, StepTime: time.Millisecond, Out: out1})
	if !errors.Is(err, ErrPreempted) {
		t.Fatalf("stopped Train = %v, want ErrPreempted\n%s", err, out1)
	}
	if got := ExitCode(err); got != 143 {
		t.Errorf("ExitCode(stopped Train) = %d, want 143", got)
	}
	first := steps(t, out1.String())
	if len(first) < 3 || len(first) >= total {
		t.Fatalf("first run ran steps %v, want 3 or a little more, fewer than %d", first, total)
	}
	if diff := cmp.Diff(seq(1, len(first)), first); diff != "" {
		t.Errorf("first run steps (-want +got):\n%s", diff)
	}
	at := first[len(first)-1]

	path := readMarker(t, allocDir)
	if !filepath.IsAbs(path) {
		t.Errorf("checkpoint path %q is not absolute", path)
	}
	if filepath.Dir(path) != ckDir {
		t.Errorf("checkpoint %s is not in BERTH_CHECKPOINT_DIR %s", path, ckDir)
	}
	ck := readCk(t, path)
	if ck.Step != at || ck.Job != "job-7" || ck.At.IsZero() {
		t.Errorf("checkpoint = %+v, want job job-7 at step %d with a time", ck, at)
	}
	if want := fmt.Sprintf("SIGTERM: checkpointed step %d to %s\n", at, path); !strings.Contains(out1.String(), want) {
		t.Errorf("first run output lacks %q:\n%s", want, out1)
	}
	if left, _ := filepath.Glob(filepath.Join(ckDir, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(allocDir, "checkpoint.tmp")); !os.IsNotExist(err) {
		t.Errorf("checkpoint.tmp left in the alloc dir (stat: %v)", err)
	}

	// Second run resumes from it.
	t.Setenv("BERTH_RESTORE", path)
	out2 := newOutput()
	if err := Train(make(chan struct{}), TrainConfig{Steps: total, StepTime: time.Millisecond, Out: out2}); err != nil {
		t.Fatalf("resumed Train = %v\n%s", err, out2)
	}
	s := out2.String()
	if want := fmt.Sprintf("resumed from %s at step %d\n", path, at); !strings.HasPrefix(s, want) {
		t.Errorf("resumed output does not start with %q:\n%s", want, s)
	}
	if want := fmt.Sprintf("done: %d steps\n", total); !strings.HasSuffix(s, want) {
		t.Errorf("resumed output does not end with %q:\n%s", want, s)
	}
	second := steps(t, s)
	if diff := cmp.Diff(seq(at+1, total), second); diff != "" {
		t.Errorf("second run steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(seq(1, total), append(append([]int{}, first...), second...)); diff != "" {
		t.Errorf("steps over both runs, each once (-want +got):\n%s", diff)
	}
}

func TestTrainCheckpointEvery(t *testing.T) {
	allocDir, ckDir := trainEnv(t)
	out := newOutput()
	if err := Train(make(chan struct{}), TrainConfig{Steps: 7, StepTime: time.Millisecond, CheckpointEvery: 2, Out: out}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"job-7-step-2.json", "job-7-step-4.json", "job-7-step-6.json"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("checkpoints (-want +got):\n%s", diff)
	}
	if got, want := readMarker(t, allocDir), filepath.Join(ckDir, "job-7-step-6.json"); got != want {
		t.Errorf("marker names %s, want the latest %s", got, want)
	}
	if ck := readCk(t, filepath.Join(ckDir, "job-7-step-4.json")); ck.Step != 4 {
		t.Errorf("job-7-step-4.json holds step %d", ck.Step)
	}
}

func TestTrainNoCheckpointAtTheEnd(t *testing.T) {
	_, ckDir := trainEnv(t)
	if err := Train(make(chan struct{}), TrainConfig{Steps: 4, StepTime: time.Millisecond, CheckpointEvery: 2, Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ckDir, "job-7-step-4.json")); !os.IsNotExist(err) {
		t.Errorf("a checkpoint was written at the final step (stat: %v)", err)
	}
}

func TestTrainCheckpointDefaultsToAllocDir(t *testing.T) {
	allocDir, _ := trainEnv(t)
	t.Setenv("BERTH_CHECKPOINT_DIR", "")
	t.Setenv("BERTH_JOB_ID", "")
	stop := make(chan struct{})
	close(stop)
	if err := Train(stop, TrainConfig{Steps: 3, StepTime: time.Hour, Out: io.Discard}); !errors.Is(err, ErrPreempted) {
		t.Fatalf("Train with stop closed = %v, want ErrPreempted", err)
	}
	want := filepath.Join(allocDir, "train-step-0.json")
	if got := readMarker(t, allocDir); got != want {
		t.Errorf("marker names %s, want %s", got, want)
	}
	if ck := readCk(t, want); ck.Step != 0 || ck.Job != "train" {
		t.Errorf("checkpoint = %+v, want job train at step 0", ck)
	}
}

func TestTrainRestoreAlreadyDone(t *testing.T) {
	allocDir, _ := trainEnv(t)
	p := filepath.Join(allocDir, "ck.json")
	if err := os.WriteFile(p, []byte(`{"job":"job-7","step":9}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BERTH_RESTORE", p)
	out := newOutput()
	if err := Train(make(chan struct{}), TrainConfig{Steps: 5, StepTime: time.Millisecond, Out: out}); err != nil {
		t.Fatal(err)
	}
	if got := steps(t, out.String()); len(got) != 0 {
		t.Errorf("ran steps %v past a checkpoint beyond the end", got)
	}
	if !strings.Contains(out.String(), "done: 9 steps\n") {
		t.Errorf("output:\n%s", out)
	}
}

func TestTrainBadRestore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content *string
	}{
		{"garbage", ptr("this is not a checkpoint\x00\xff")},
		{"wrong shape", ptr(`["step", 3]`)},
		{"negative step", ptr(`{"job":"j","step":-1}`)},
		{"missing file", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allocDir, _ := trainEnv(t)
			p := filepath.Join(allocDir, "restore.json")
			if tc.content != nil {
				if err := os.WriteFile(p, []byte(*tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("BERTH_RESTORE", p)
			out := newOutput()
			err := Train(make(chan struct{}), TrainConfig{Steps: 5, StepTime: time.Millisecond, Out: out})
			if err == nil {
				t.Fatalf("Train with a bad BERTH_RESTORE = nil\n%s", out)
			}
			if !strings.Contains(err.Error(), "BERTH_RESTORE") {
				t.Errorf("error %q does not mention BERTH_RESTORE", err)
			}
			if ExitCode(err) != 1 {
				t.Errorf("ExitCode = %d, want 1", ExitCode(err))
			}
			if got := steps(t, out.String()); len(got) != 0 {
				t.Errorf("ran steps %v after a failed restore", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"preempted", ErrPreempted, 143},
		{"preempted wrapped", fmt.Errorf("train: %w", ErrPreempted), 143},
		{"other", errors.New("boom"), 1},
		{"wrapping another", fmt.Errorf("checkpoint on SIGTERM: %w", os.ErrPermission), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
	if 128+int(syscall.SIGTERM) != 143 {
		t.Errorf("SIGTERM is %d here", syscall.SIGTERM)
	}
}

func TestServeValidation(t *testing.T) {
	t.Setenv("BERTH_ALLOC_DIR", "")
	for _, tc := range []struct {
		name  string
		cfg   ServeConfig
		field string
	}{
		{"drain 0", ServeConfig{Listen: "127.0.0.1:0"}, "--drain"},
		{"drain negative", ServeConfig{Listen: "127.0.0.1:0", Drain: -time.Second}, "--drain"},
		{"bad listen", ServeConfig{Listen: "127.0.0.1:notaport", Drain: time.Second}, "--listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Out = io.Discard
			stop := make(chan struct{})
			close(stop)
			err := Serve(stop, tc.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
				t.Errorf("Serve(%+v) = %v, want an error starting with %s", tc.cfg, err, tc.field)
			}
		})
	}
}

type served struct {
	addr string
	out  *output
	stop chan struct{}
	done chan struct{} // closed when Serve returns, err set
	err  error
}

// result waits for Serve to return.
func (s *served) result(t *testing.T) error {
	t.Helper()
	wait(t, "Serve to return", s.done)
	return s.err
}

func startServe(t *testing.T, cfg ServeConfig) *served {
	t.Helper()
	allocDir := t.TempDir()
	t.Setenv("BERTH_ALLOC_DIR", allocDir)
	s := &served{out: newOutput(), stop: make(chan struct{}), done: make(chan struct{})}
	cfg.Listen, cfg.Out = "127.0.0.1:0", s.out
	if cfg.Drain == 0 {
		cfg.Drain = 5 * time.Second
	}
	ready := s.out.when("serving on http://")
	go func() {
		s.err = Serve(s.stop, cfg)
		close(s.done)
	}()
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("Serve returned early: %v", s.err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve never said it was serving")
	}
	b, err := os.ReadFile(filepath.Join(allocDir, "addr"))
	if err != nil {
		t.Fatalf("addr file: %v", err)
	}
	s.addr = strings.TrimSpace(string(b))
	if !strings.HasPrefix(s.addr, "127.0.0.1:") || s.addr == "127.0.0.1:0" {
		t.Fatalf("addr file holds %q, want the bound address", b)
	}
	if !strings.Contains(s.out.String(), "serving on http://"+s.addr+"\n") {
		t.Errorf("output does not name %s:\n%s", s.addr, s.out)
	}
	if _, err := os.Stat(filepath.Join(allocDir, "addr.tmp")); !os.IsNotExist(err) {
		t.Errorf("addr.tmp left behind (stat: %v)", err)
	}
	t.Cleanup(func() {
		select {
		case <-s.stop:
		default:
			close(s.stop)
		}
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
		}
	})
	return s
}

func getReply(t *testing.T, c *http.Client, url string) Reply {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var r Reply
	dec := json.NewDecoder(resp.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r
}

func TestServe(t *testing.T) {
	t.Setenv("BERTH_DEPLOYMENT", "chat-7b")
	t.Setenv("BERTH_REPLICA", "2")
	t.Setenv("BERTH_ALLOC_ID", "chat-7b.r2")
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1")
	s := startServe(t, ServeConfig{})
	c := &http.Client{Timeout: 10 * time.Second}

	want := Reply{Deployment: "chat-7b", Replica: 2, Alloc: "chat-7b.r2", GPUs: "0,1", Served: 1}
	if diff := cmp.Diff(want, getReply(t, c, "http://"+s.addr+"/")); diff != "" {
		t.Errorf("first reply (-want +got):\n%s", diff)
	}
	want.Served = 2
	if diff := cmp.Diff(want, getReply(t, c, "http://"+s.addr+"/v1/generate?x=1")); diff != "" {
		t.Errorf("second reply (-want +got):\n%s", diff)
	}

	resp, err := c.Get("http://" + s.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("/healthz = %s %q, want 200 ok", resp.Status, body)
	}

	close(s.stop)
	if err := s.result(t); err != nil {
		t.Errorf("Serve after stop = %v, want nil", err)
	}
	out := s.out.String()
	if !strings.Contains(out, "SIGTERM: draining") || !strings.Contains(out, "drained after 2 requests\n") {
		t.Errorf("output:\n%s", out)
	}
	// Stopped: no new connections.
	c.CloseIdleConnections()
	if resp, err := c.Get("http://" + s.addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("GET after Serve returned: %s, want the connection refused", resp.Status)
	}
}

func TestServeReplicaDefault(t *testing.T) {
	t.Setenv("BERTH_DEPLOYMENT", "")
	t.Setenv("BERTH_REPLICA", "")
	s := startServe(t, ServeConfig{})
	r := getReply(t, http.DefaultClient, "http://"+s.addr+"/")
	if r.Replica != 0 || r.Deployment != "" {
		t.Errorf("reply %+v, want replica 0 and no deployment with the env unset", r)
	}
}

// inFlight starts a GET / and returns once the request has been written,
// plus a channel with its outcome.
func inFlight(t *testing.T, addr string) <-chan error {
	t.Helper()
	wrote := make(chan struct{})
	res := make(chan error, 1)
	go func() {
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(wrote) }}
		req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
		if err != nil {
			res <- err
			return
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			res <- err
			return
		}
		defer resp.Body.Close()
		var r Reply
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			res <- fmt.Errorf("reply: %w", err)
			return
		}
		if resp.StatusCode != http.StatusOK || r.Served != 1 {
			res <- fmt.Errorf("%s, reply %+v", resp.Status, r)
			return
		}
		res <- nil
	}()
	select {
	case <-wrote:
	case err := <-res:
		t.Fatalf("request failed before it was written: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("request never written")
	}
	// Let the server accept the connection and enter the handler; the
	// handler then sleeps for its Latency, well past this.
	time.Sleep(50 * time.Millisecond)
	return res
}

func TestServeDrainsInFlight(t *testing.T) {
	s := startServe(t, ServeConfig{Latency: 300 * time.Millisecond})
	res := inFlight(t, s.addr)
	close(s.stop)
	if err := s.result(t); err != nil {
		t.Errorf("Serve after stop = %v, want nil", err)
	}
	if err := wait(t, "the request in flight", res); err != nil {
		t.Errorf("request in flight at stop: %v, want 200", err)
	}
	if !strings.Contains(s.out.String(), "drained after 1 requests\n") {
		t.Errorf("output:\n%s", s.out)
	}
}

func TestServeDrainDeadline(t *testing.T) {
	s := startServe(t, ServeConfig{Latency: 400 * time.Millisecond, Drain: 10 * time.Millisecond})
	res := inFlight(t, s.addr)
	close(s.stop)
	err := s.result(t)
	if err == nil || !strings.HasPrefix(err.Error(), "drain:") {
		t.Errorf("Serve with a request outliving Drain = %v, want a drain error", err)
	}
	// Serve gave up on it, but wait for it so no request outlives the test.
	_ = wait(t, "the request in flight", res)
}

func TestServeBadAllocDir(t *testing.T) {
	t.Setenv("BERTH_ALLOC_DIR", filepath.Join(t.TempDir(), "missing"))
	err := Serve(make(chan struct{}), ServeConfig{Listen: "127.0.0.1:0", Drain: time.Second, Out: io.Discard})
	if err == nil {
		t.Error("Serve with an alloc dir it cannot write = nil, want an error")
	}
}
