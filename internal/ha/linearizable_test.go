package ha

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// Operations in the history, as the model sees them.
type linInput struct {
	Op  string // submit, cancel, get, scale, getdep
	Key string // a job's idempotency key, or "dep:<name>"
	Val int    // scale: the desired replicas asked for
}

type linOutput struct {
	Result string // ok, unknown, conflict, notfound
	ID     string // submit: the job id
	State  string // get: active or cancelled
	Val    int    // scale, getdep: desired replicas
}

// linState is one key's state: a job (exists, its id, cancelled) or a
// deployment's desired replicas.
type linState struct {
	Exists    bool
	ID        string
	Cancelled bool
	Desired   int
}

// linModel is the sequential specification berth's API must look like
// from outside, whichever server answers and whoever leads.
var linModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(linInput).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{linState{Desired: 1}} },
	Step: func(s, in, out interface{}) []interface{} {
		st, i, o := s.(linState), in.(linInput), out.(linOutput)
		unknown := o.Result == "unknown"
		switch i.Op {
		case "submit":
			if unknown {
				next := st
				next.Exists = true
				return []interface{}{st, next}
			}
			if o.Result != "ok" || (st.ID != "" && st.ID != o.ID) {
				return nil
			}
			next := st
			next.Exists, next.ID = true, o.ID
			return []interface{}{next}
		case "cancel":
			next := st
			next.Cancelled = true
			switch {
			case unknown && st.Exists:
				return []interface{}{st, next}
			case unknown:
				return []interface{}{st}
			case o.Result == "ok" && st.Exists && !st.Cancelled:
				return []interface{}{next}
			case o.Result == "conflict" && st.Cancelled:
				return []interface{}{st}
			case o.Result == "notfound" && !st.Exists:
				return []interface{}{st}
			}
			return nil
		case "get":
			switch {
			case o.State == "active" && st.Exists && !st.Cancelled,
				o.State == "cancelled" && st.Cancelled,
				o.Result == "notfound" && !st.Exists:
				return []interface{}{st}
			}
			return nil
		case "scale":
			next := st
			next.Desired = i.Val
			if unknown {
				return []interface{}{st, next}
			}
			if o.Result == "ok" && o.Val == i.Val {
				return []interface{}{next}
			}
			return nil
		case "getdep":
			if o.Val == st.Desired {
				return []interface{}{st}
			}
			return nil
		}
		return nil
	},
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(linInput), out.(linOutput)
		return fmt.Sprintf("%s(%s,%d) -> %s %s%s %d", i.Op, i.Key, i.Val, o.Result, o.ID, o.State, o.Val)
	},
}

// TestLinearizableThroughFailovers records concurrent submits, cancels,
// scales and reads against all three servers while leaders are killed and
// come back, and checks the history with porcupine.
func TestLinearizableThroughFailovers(t *testing.T) {
	c := newCluster(t)
	c.startFleet("n1")
	deps := []string{"d0", "d1"}
	one := 1
	for _, d := range deps {
		c.eventually("create "+d, 20*time.Second, func() error {
			st, body, _, err := c.client(c.admin).do(http.MethodPost, "/v1/deployments", api.DeploymentRequest{Name: d, Model: "m", Team: "t",
				ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MinReplicas: 1, MaxReplicas: 4, Desired: &one})
			if err != nil || (st != 201 && st != 409) {
				return fmt.Errorf("%d %s %v", st, body, err)
			}
			return nil
		})
	}

	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	known := map[string]string{} // job id → key
	var ids []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			cl := c.client(c.admin)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var in linInput
				var method, path string
				var body any
				var header []string
				mu.Lock()
				pick := r.IntN(100)
				var id string
				if len(ids) > 0 {
					id = ids[r.IntN(len(ids))]
				}
				mu.Unlock()
				switch {
				case pick < 35 || id == "":
					key := fmt.Sprintf("c%d-%d", w, n)
					in = linInput{Op: "submit", Key: key}
					method, path, body, header = http.MethodPost, "/v1/jobs", api.JobRequest{Name: key, Team: "t", GPUs: 1, Topology: "node", Command: sleeper}, []string{"Idempotency-Key", key}
				case pick < 55:
					mu.Lock()
					in = linInput{Op: "cancel", Key: known[id]}
					mu.Unlock()
					method, path = http.MethodDelete, "/v1/jobs/"+id
				case pick < 75:
					mu.Lock()
					in = linInput{Op: "get", Key: known[id]}
					mu.Unlock()
					method, path = http.MethodGet, "/v1/jobs/"+id
				case pick < 90:
					d := deps[r.IntN(len(deps))]
					in = linInput{Op: "scale", Key: "dep:" + d, Val: 1 + r.IntN(4)}
					v := in.Val
					method, path, body = http.MethodPatch, "/v1/deployments/"+d, api.ScaleRequest{Desired: &v}
				default:
					d := deps[r.IntN(len(deps))]
					in = linInput{Op: "getdep", Key: "dep:" + d}
					method, path = http.MethodGet, "/v1/deployments/"+d
				}
				call := time.Since(start).Nanoseconds()
				st, resp, _, err := cl.do(method, path, body, header...)
				ret := time.Since(start).Nanoseconds()
				out, ok := outcome(in, st, resp, err)
				if !ok {
					continue // a read that failed says nothing
				}
				if out.Result == "unknown" {
					ret = int64(1) << 62 // it may take effect at any later time
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
				if in.Op == "submit" && out.Result == "ok" {
					if _, seen := known[out.ID]; !seen {
						known[out.ID] = in.Key
						ids = append(ids, out.ID)
					}
				}
				mu.Unlock()
			}
		}()
	}
	// Faults: kill the leader, bring it back, pause the next one past its
	// lease, wake it.
	time.Sleep(2 * time.Second)
	l1, _, _ := c.waitLeader(nil, 30*time.Second)
	c.kill(l1)
	time.Sleep(3 * time.Second)
	c.start(l1, "")
	l2, _, _ := c.waitLeader(nil, 30*time.Second) // l1, back, may lead again
	c.signal(l2, syscall.SIGSTOP)
	time.Sleep(2 * ttl)
	c.signal(l2, syscall.SIGCONT)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	counts := map[string]int{}
	for _, op := range history {
		counts[op.Input.(linInput).Op+"/"+op.Output.(linOutput).Result]++
	}
	t.Logf("%d operations through two failovers: %v", len(history), counts)
	if counts["submit/ok"] < 20 || counts["scale/ok"] < 5 || counts["cancel/ok"] < 5 {
		t.Fatalf("too little happened to judge: %v", counts)
	}
	m := linModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(m, history, 2*time.Minute)
	if res != porcupine.Ok {
		p := filepath.Join(t.TempDir(), "history.html")
		if f, err := os.Create(p); err == nil {
			porcupine.Visualize(m, info, f)
			f.Close()
		}
		t.Fatalf("history is not linearizable (%s); visualization: %s", res, p)
	}
}

// outcome turns an HTTP answer into the model's output. ok=false drops
// the operation (a failed read).
func outcome(in linInput, status int, body []byte, err error) (linOutput, bool) {
	read := in.Op == "get" || in.Op == "getdep"
	switch {
	case err != nil || status >= 500:
		// The request may or may not have been applied.
		return linOutput{Result: "unknown"}, !read
	case status == http.StatusNotFound:
		return linOutput{Result: "notfound"}, true
	case status == http.StatusConflict:
		return linOutput{Result: "conflict"}, true
	case status >= 300:
		return linOutput{Result: fmt.Sprintf("http %d: %s", status, body)}, true
	}
	switch in.Op {
	case "submit":
		var a api.JobAccepted
		json.Unmarshal(body, &a)
		return linOutput{Result: "ok", ID: a.JobID}, true
	case "cancel":
		return linOutput{Result: "ok"}, true
	case "get":
		var j api.Job
		json.Unmarshal(body, &j)
		s := "active"
		if j.State == model.JobCancelled {
			s = "cancelled"
		} else if j.State.Terminal() {
			s = string(j.State)
		}
		return linOutput{Result: "ok", State: s}, true
	case "scale", "getdep":
		var d api.Deployment
		json.Unmarshal(body, &d)
		return linOutput{Result: "ok", Val: d.Desired}, true
	}
	return linOutput{}, false
}

// TestModelRejectsIllegalHistories: the checker above can fail. A stale
// read, a lost acknowledged cancel and an id that changes under one
// idempotency key are each caught.
func TestModelRejectsIllegalHistories(t *testing.T) {
	op := func(in linInput, call, ret int64, out linOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Return: ret, Output: out}
	}
	m := linModel.ToModel()
	for name, h := range map[string][]porcupine.Operation{
		"stale read": {
			op(linInput{Op: "scale", Key: "dep:d", Val: 3}, 0, 10, linOutput{Result: "ok", Val: 3}),
			op(linInput{Op: "getdep", Key: "dep:d"}, 20, 30, linOutput{Result: "ok", Val: 1}),
		},
		"cancel lost": {
			op(linInput{Op: "submit", Key: "k"}, 0, 10, linOutput{Result: "ok", ID: "j1"}),
			op(linInput{Op: "cancel", Key: "k"}, 20, 30, linOutput{Result: "ok"}),
			op(linInput{Op: "get", Key: "k"}, 40, 50, linOutput{Result: "ok", State: "active"}),
		},
		"two ids for one key": {
			op(linInput{Op: "submit", Key: "k"}, 0, 10, linOutput{Result: "ok", ID: "j1"}),
			op(linInput{Op: "submit", Key: "k"}, 20, 30, linOutput{Result: "ok", ID: "j2"}),
		},
	} {
		if porcupine.CheckOperations(m, h) {
			t.Errorf("%s: accepted as linearizable", name)
		}
	}
	legal := []porcupine.Operation{
		op(linInput{Op: "scale", Key: "dep:d", Val: 3}, 0, 1<<62, linOutput{Result: "unknown"}),
		op(linInput{Op: "getdep", Key: "dep:d"}, 20, 30, linOutput{Result: "ok", Val: 1}),
		op(linInput{Op: "getdep", Key: "dep:d"}, 40, 50, linOutput{Result: "ok", Val: 3}),
	}
	if !porcupine.CheckOperations(m, legal) {
		t.Error("an unknown write seen late was judged illegal")
	}
}
