package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// waitLimit bounds every poll: generous, for a loaded two-core machine.
const waitLimit = 20 * time.Second

// fakeNode is one node the harness heartbeats for.
type fakeNode struct {
	ID  string
	Pod string
}

// defaultNodes: two 8-GPU nodes in pod p1 and one in pod p2 (24 GPUs).
var defaultNodes = []fakeNode{{"n1", "p1"}, {"n2", "p1"}, {"n3", "p2"}}

// cluster is a real server (embedded etcd, real HTTP) plus fake nodes that
// heartbeat to whichever instance is current.
type cluster struct {
	t     *testing.T
	dir   string
	nodes []fakeNode

	mu        sync.Mutex
	in        *Instance
	admin     string
	bootstrap []string // every secret Bootstrap was handed, across starts

	hbStop context.CancelFunc
	hbDone chan struct{}
	// control, when set, changes the loop's config before each start.
	control func(*control.Config)
}

// newCluster starts a server on a fresh data dir, captures the bootstrap
// admin token, registers the nodes and keeps them alive until the test ends.
func newCluster(t *testing.T, nodes ...fakeNode) *cluster {
	t.Helper()
	return newClusterWith(t, nil, nodes...)
}

// newClusterWith is newCluster with the control loop's config changed.
func newClusterWith(t *testing.T, ctl func(*control.Config), nodes ...fakeNode) *cluster {
	t.Helper()
	if len(nodes) == 0 {
		nodes = defaultNodes
	}
	c := &cluster{t: t, dir: t.TempDir(), nodes: nodes, control: ctl}
	c.start()
	c.mu.Lock()
	if len(c.bootstrap) != 1 {
		c.mu.Unlock()
		t.Fatalf("first start: Bootstrap called %d times, want 1", len(c.bootstrap))
	}
	c.admin = c.bootstrap[0]
	c.mu.Unlock()
	t.Cleanup(func() {
		c.mu.Lock()
		in := c.in
		c.in = nil
		c.mu.Unlock()
		if in != nil {
			if err := in.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
	})
	for _, n := range nodes {
		c.heartbeat(n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.hbStop, c.hbDone = cancel, make(chan struct{})
	go c.keepAlive(ctx)
	// Registered after the server's cleanup, so it runs before it.
	t.Cleanup(c.stopHeartbeats)
	c.waitNodes()
	return c
}

// start starts an instance on the cluster's data dir and waits until it
// leads (and, on a first start, has handed out the admin token).
func (c *cluster) start() {
	t := c.t
	t.Helper()
	first := c.admin == ""
	cfg := Config{Listen: "127.0.0.1:0", DataDir: c.dir,
		Control: control.Config{HeartbeatInterval: 200 * time.Millisecond, Tick: 50 * time.Millisecond},
		Logger:  slog.New(slog.DiscardHandler),
		Bootstrap: func(secret string) {
			c.mu.Lock()
			c.bootstrap = append(c.bootstrap, secret)
			c.mu.Unlock()
		}}
	if c.control != nil {
		c.control(&cfg.Control)
	}
	in, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c.mu.Lock()
	c.in = in
	c.mu.Unlock()
	c.eventually("server leading and ready", func() error {
		if first {
			c.mu.Lock()
			n := len(c.bootstrap)
			c.mu.Unlock()
			if n == 0 {
				return fmt.Errorf("no bootstrap token yet")
			}
		}
		if !in.Controller.Leading() {
			return fmt.Errorf("not leading yet")
		}
		status, body := c.raw("", "GET", "/readyz", nil)
		if status != 200 {
			return fmt.Errorf("readyz %d: %s", status, body)
		}
		return nil
	})
}

// restart stops the instance and starts a new one on the same data dir.
func (c *cluster) restart() {
	c.t.Helper()
	c.mu.Lock()
	in := c.in
	c.in = nil
	c.mu.Unlock()
	if err := in.Stop(); err != nil {
		c.t.Fatalf("stop: %v", err)
	}
	c.start()
}

func (c *cluster) instance() *Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in
}

func (c *cluster) stopHeartbeats() {
	if c.hbStop != nil {
		c.hbStop()
		<-c.hbDone
		c.hbStop = nil
	}
}

func (c *cluster) report(n fakeNode) api.Heartbeat {
	return api.Heartbeat{NodeID: n.ID, BootEpoch: 1, Pod: n.Pod, Model: "H100", GPUs: 8,
		CPUMilli: 128000, MemoryMiB: 1 << 20}
}

// heartbeat registers one node, failing the test if it cannot.
func (c *cluster) heartbeat(n fakeNode) {
	c.t.Helper()
	var o api.Orders
	c.mustJSON(c.admin, "POST", "/v1/agent/heartbeat", c.report(n), 200, &o)
	if o.NodeID != n.ID || o.Fence == 0 {
		c.t.Fatalf("heartbeat %s: orders %+v", n.ID, o)
	}
}

// keepAlive heartbeats every node every 100 ms, to whichever instance is
// current; failures (during a restart) are ignored.
func (c *cluster) keepAlive(ctx context.Context) {
	defer close(c.hbDone)
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		in := c.instance()
		if in == nil {
			continue
		}
		for _, n := range c.nodes {
			b, _ := json.Marshal(c.report(n))
			req, err := http.NewRequestWithContext(ctx, "POST", "http://"+in.Addr+"/v1/agent/heartbeat", bytes.NewReader(b))
			if err != nil {
				continue
			}
			req.Header.Set("Authorization", "Bearer "+c.admin)
			if resp, err := hc.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
}

// waitNodes waits until every node is in the table and healthy.
func (c *cluster) waitNodes() {
	c.eventually("nodes registered", func() error {
		var l api.NodeList
		if err := c.getJSON(c.admin, "/v1/nodes", &l); err != nil {
			return err
		}
		if len(l.Nodes) != len(c.nodes) {
			return fmt.Errorf("%d nodes, want %d", len(l.Nodes), len(c.nodes))
		}
		for _, n := range l.Nodes {
			if n.Health != model.HealthHealthy {
				return fmt.Errorf("node %s is %s", n.ID, n.Health)
			}
		}
		return nil
	})
}

// eventually polls fn until it returns nil, failing after waitLimit.
func (c *cluster) eventually(what string, fn func() error) {
	c.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: still not true after %s: %v", what, waitLimit, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// raw sends one request; body is a string or []byte sent as is, or any
// other value marshalled as JSON. Headers come in name, value pairs.
func (c *cluster) raw(token, method, path string, body any, header ...string) (int, []byte) {
	c.t.Helper()
	status, data, err := c.try(token, method, path, body, header...)
	if err != nil {
		c.t.Fatal(err)
	}
	return status, data
}

// try is raw that returns its error, for subtests and goroutines.
func (c *cluster) try(token, method, path string, body any, header ...string) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return 0, nil, fmt.Errorf("marshal: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "http://"+c.instance().Addr+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, data, nil
}

// mustJSON sends a request, requires the status and decodes the answer
// into out (nil to discard).
func (c *cluster) mustJSON(token, method, path string, body any, want int, out any, header ...string) {
	c.t.Helper()
	status, data := c.raw(token, method, path, body, header...)
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

// getJSON is a GET for polls: errors instead of failing.
func (c *cluster) getJSON(token, path string, out any) error {
	status, data := c.raw(token, "GET", path, nil)
	if status != 200 {
		return fmt.Errorf("GET %s: %d: %s", path, status, data)
	}
	return json.Unmarshal(data, out)
}

// apiError decodes an error body, failing unless it is {"error": {...}}
// with a code and a message.
func (c *cluster) apiError(data []byte) api.Error {
	c.t.Helper()
	return parseError(c.t, data)
}

func parseError(t testing.TB, data []byte) api.Error {
	t.Helper()
	var eb api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error body %s: %v", data, err)
	}
	if eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("error body %s: want a code and a message", data)
	}
	return eb.Error
}

// token creates a token for a role as admin and returns its secret.
func (c *cluster) token(role string) string {
	c.t.Helper()
	var tok api.Token
	c.mustJSON(c.admin, "POST", "/v1/tokens", api.TokenRequest{Role: role, Name: "test " + role}, 201, &tok)
	if tok.Secret == "" || tok.Role != role || tok.ID == "" {
		c.t.Fatalf("token for %s: %+v", role, tok)
	}
	return tok.Secret
}

// submit posts a job as token and returns the acceptance.
func (c *cluster) submit(token string, req api.JobRequest, header ...string) api.JobAccepted {
	c.t.Helper()
	if len(req.Command) == 0 && req.Image == "" {
		req.Image = "x" // no agent runs it here; a job must name its workload
	}
	var acc api.JobAccepted
	c.mustJSON(token, "POST", "/v1/jobs", req, 202, &acc, header...)
	if acc.JobID == "" {
		c.t.Fatalf("submit %s: no job_id", req.Name)
	}
	return acc
}

// waitJob polls a job until ok accepts it.
func (c *cluster) waitJob(id, what string, ok func(api.Job) error) api.Job {
	c.t.Helper()
	var j api.Job
	c.eventually("job "+id+" "+what, func() error {
		j = api.Job{}
		if err := c.getJSON(c.admin, "/v1/jobs/"+id, &j); err != nil {
			return err
		}
		return ok(j)
	})
	return j
}

// waitRunning waits until a job runs with allocations covering its GPUs.
func (c *cluster) waitRunning(id string) api.Job {
	c.t.Helper()
	return c.waitJob(id, "running", func(j api.Job) error {
		n := 0
		for _, a := range j.Allocations {
			n += a.GPUs.Count()
		}
		if j.State != model.JobRunning || n != j.Shape.GPUs {
			return fmt.Errorf("state %s with %d of %d GPUs allocated (pending: %+v)", j.State, n, j.Shape.GPUs, j.PendingReason)
		}
		return nil
	})
}

// waitActual waits until a deployment has exactly n replicas placed.
func (c *cluster) waitActual(id string, n int) api.Deployment {
	c.t.Helper()
	var d api.Deployment
	c.eventually(fmt.Sprintf("deployment %s at %d replicas", id, n), func() error {
		d = api.Deployment{}
		if err := c.getJSON(c.admin, "/v1/deployments/"+id, &d); err != nil {
			return err
		}
		if d.Actual != n || d.Stopping != 0 {
			return fmt.Errorf("actual %d (stopping %d), target %d, pending %+v", d.Actual, d.Stopping, d.Target, d.Pending)
		}
		return nil
	})
	return d
}

// jobCount is how many jobs the table holds.
func (c *cluster) jobCount() int {
	n := 0
	c.instance().Store.Cache().Read(func(v store.View) { n = v.Len(store.Jobs) })
	return n
}

// tableState is what a refused request must not change: every object's
// identity and the fields a request could touch.
func (c *cluster) tableState() map[string]string {
	out := map[string]string{}
	c.instance().Store.Cache().Read(func(v store.View) {
		v.Each(store.Jobs, func(id string, e store.Entry) {
			j := *e.Obj.(*model.Job)
			out["job/"+id] = fmt.Sprintf("team=%s state=%s prio=%d", j.Team, j.State, j.Priority)
		})
		v.Each(store.Deployments, func(id string, e store.Entry) {
			d := e.Obj.(model.Deployment)
			out["deployment/"+id] = fmt.Sprintf("team=%s desired=%d min=%d max=%d", d.Team, d.Desired, d.MinReplicas, d.MaxReplicas)
		})
		v.Each(store.Allocations, func(id string, e store.Entry) {
			a := e.Obj.(model.Allocation)
			out["alloc/"+id] = fmt.Sprintf("owner=%s node=%s gpus=%s stopping=%t", a.OwnerID, a.NodeID, a.GPUs, a.Stopping)
		})
		v.Each(store.Nodes, func(id string, e store.Entry) {
			n := e.Obj.(model.Node)
			out["node/"+id] = fmt.Sprintf("draining=%t quarantined=%t qgpus=%s epoch=%d gpus=%d",
				n.Draining, n.Quarantined, n.QuarantinedGPUs, n.BootEpoch, n.GPUs)
		})
		v.Each(store.Quotas, func(id string, e store.Entry) {
			out["quota/"+id] = fmt.Sprintf("%+v", e.Obj)
		})
		out["tokens"] = fmt.Sprint(v.Len(store.Tokens))
		out["idempotency"] = fmt.Sprint(v.Len(store.Idempotency))
	})
	return out
}
