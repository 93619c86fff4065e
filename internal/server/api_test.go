package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func intp(n int) *int { return &n }

func jobIDs(l api.JobList) []string {
	out := []string{}
	for _, j := range l.Jobs {
		out = append(out, j.ID)
	}
	return out
}

// listJobs is GET /v1/jobs with a query, as token.
func (c *cluster) listJobs(token string, q url.Values) api.JobList {
	c.t.Helper()
	var l api.JobList
	c.mustJSON(token, "GET", "/v1/jobs?"+q.Encode(), nil, 200, &l)
	return l
}

func TestAPIJobs(t *testing.T) {
	c := newCluster(t)
	teamA, teamB := c.token("team:a"), c.token("team:b")

	acc := c.submit(teamA, api.JobRequest{Name: "train-a", Command: []string{"sleep", "1000"}, GPUs: 8, Topology: "node"})
	if acc.State != model.JobPending || acc.QueuePosition < 1 || !acc.Created {
		t.Fatalf("submit: %+v, want pending with a queue position, created", acc)
	}
	a := c.waitRunning(acc.JobID)
	if a.Team != "a" || a.Org != "default" || a.Owner == "" {
		t.Errorf("job a: team %q org %q owner %q, want team a, org default and an owner", a.Team, a.Org, a.Owner)
	}
	for _, al := range a.Allocations {
		if al.NodeID != a.Allocations[0].NodeID {
			t.Errorf("node-topology job spans nodes: %+v", a.Allocations)
		}
	}
	b := c.waitRunning(c.submit(teamB, api.JobRequest{Name: "train-b", Image: "x", GPUs: 2, Topology: "any"}).JobID)
	// A share job: this fleet has no sharing pool, so it waits, which the
	// filters do not mind; it is cancelled after them.
	share := c.submit(teamB, api.JobRequest{Name: "share-b", Image: "x", GPUs: 1, GPUMilli: 250, Topology: "node"}).JobID

	// Filters.
	for _, tc := range []struct {
		q    url.Values
		want []string
	}{
		{url.Values{"team": {"a"}}, []string{a.ID}},
		{url.Values{"team": {"b"}}, []string{b.ID, share}},
		{url.Values{"state": {"running"}}, []string{a.ID, b.ID}},
		{url.Values{"state": {"pending"}}, []string{share}},
		{url.Values{"kind": {"share"}}, []string{share}},
		{url.Values{"kind": {"whole"}}, []string{a.ID, b.ID}},
		{url.Values{"kind": {"whole"}, "team": {"b"}}, []string{b.ID}},
		{url.Values{"kind": {"share"}, "state": {"running"}}, []string{}},
		{url.Values{"team": {"a"}, "state": {"running"}}, []string{a.ID}},
		{url.Values{"team": {"b"}, "state": {"cancelled"}}, []string{}},
		{url.Values{"team": {"nobody"}}, []string{}},
	} {
		if diff := cmp.Diff(tc.want, jobIDs(c.listJobs(c.admin, tc.q)), cmpopts.SortSlices(func(x, y string) bool { return x < y })); diff != "" {
			t.Errorf("GET /v1/jobs?%s (-want +got):\n%s", tc.q.Encode(), diff)
		}
	}
	if diff := cmp.Diff([]string{a.ID}, jobIDs(c.listJobs(teamA, nil))); diff != "" {
		t.Errorf("team a's list (-want +got):\n%s", diff)
	}
	status, data := c.raw(c.admin, "GET", "/v1/jobs?state=sleeping", nil)
	if e := c.apiError(data); status != 400 || e.Field != "state" {
		t.Errorf("bad state filter: %d %+v, want 400 naming state", status, e)
	}
	status, data = c.raw(c.admin, "GET", "/v1/jobs?kind=inference", nil)
	if e := c.apiError(data); status != 400 || e.Field != "kind" {
		t.Errorf("bad kind filter: %d %+v, want 400 naming kind", status, e)
	}
	c.mustJSON(c.admin, "DELETE", "/v1/jobs/"+share, nil, 200, nil)

	// A job that cannot fit now waits with a reason, then is cancelled.
	big := c.submit(c.admin, api.JobRequest{Name: "big", Team: "c", Image: "x", GPUs: 24, Topology: "any"})
	if big.State != model.JobPending || big.QueuePosition < 1 {
		t.Errorf("big: %+v, want pending with a queue position", big)
	}
	p := c.waitJob(big.JobID, "pending with a reason", func(j api.Job) error {
		if j.State != model.JobPending || j.PendingReason == nil || j.PendingReason.Code == "queued" {
			return fmt.Errorf("state %s, reason %+v", j.State, j.PendingReason)
		}
		return nil
	})
	if p.PendingReason.Message == "" || p.QueuePosition < 1 || len(p.Allocations) != 0 {
		t.Errorf("pending job: reason %+v, queue position %d, allocations %v", p.PendingReason, p.QueuePosition, p.Allocations)
	}
	if l := c.listJobs(c.admin, url.Values{"state": {"pending"}}); len(l.Jobs) != 1 || l.Jobs[0].PendingReason == nil {
		t.Errorf("pending list: %+v, want the big job with its reason", l.Jobs)
	}
	var cancelled api.Job
	c.mustJSON(c.admin, "DELETE", "/v1/jobs/"+big.JobID, nil, 200, &cancelled)
	if cancelled.State != model.JobCancelled {
		t.Errorf("cancel: state %s", cancelled.State)
	}
	c.waitJob(big.JobID, "cancelled", func(j api.Job) error {
		if j.State != model.JobCancelled {
			return fmt.Errorf("state %s", j.State)
		}
		return nil
	})
	status, data = c.raw(c.admin, "DELETE", "/v1/jobs/"+big.JobID, nil)
	if e := c.apiError(data); status != 409 || e.Code != "conflict" {
		t.Errorf("second cancel: %d %+v, want 409 conflict", status, e)
	}
	for _, m := range []string{"GET", "DELETE"} {
		status, data = c.raw(c.admin, m, "/v1/jobs/j-nope", nil)
		if e := c.apiError(data); status != 404 || e.Code != "not_found" {
			t.Errorf("%s missing job: %d %+v, want 404", m, status, e)
		}
	}

	// Idempotency: the retry returns the first job; keys are per principal.
	n := c.jobCount()
	req := api.JobRequest{Name: "retry", Image: "x", GPUs: 1, Topology: "any"}
	first := c.submit(teamA, req, "Idempotency-Key", "k-1")
	again := c.submit(teamA, req, "Idempotency-Key", "k-1")
	if !first.Created || again.Created || again.JobID != first.JobID {
		t.Errorf("idempotent retry: first %+v, again %+v: want the same job_id, created false", first, again)
	}
	other := c.submit(teamB, req, "Idempotency-Key", "k-1")
	if !other.Created || other.JobID == first.JobID {
		t.Errorf("another team's key k-1 returned %+v: keys must be per principal", other)
	}
	// The same key with another body is the client's bug: 422 naming
	// the key, nothing created (it used to answer with the first job).
	changed := req
	changed.GPUs = 2
	if status, data, err := c.try(teamA, "POST", "/v1/jobs", changed, "Idempotency-Key", "k-1"); err != nil || status != 422 ||
		!strings.Contains(string(data), `"idempotency_mismatch"`) || !strings.Contains(string(data), first.JobID) {
		t.Errorf("same key, different body: %d %s %v; want 422 naming Idempotency-Key and %s", status, data, err, first.JobID)
	}
	if got := c.jobCount(); got != n+2 {
		t.Errorf("after two submits and a retry: %d jobs, want %d", got, n+2)
	}
	// Racing retries of one key make one job.
	var wg sync.WaitGroup
	accs := make([]api.JobAccepted, 8)
	errs := make([]error, len(accs))
	for i := range accs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, data, err := c.try(teamA, "POST", "/v1/jobs", req, "Idempotency-Key", "k-race")
			if err == nil && status != 202 {
				err = fmt.Errorf("status %d: %s", status, data)
			}
			if err == nil {
				err = json.Unmarshal(data, &accs[i])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	made := 0
	for i, acc := range accs {
		if errs[i] != nil {
			t.Fatalf("racing submit: %v", errs[i])
		}
		if acc.Created {
			made++
		}
		if acc.JobID != accs[0].JobID {
			t.Errorf("racing submits with one key: job ids %s and %s", accs[0].JobID, acc.JobID)
		}
	}
	if made != 1 || c.jobCount() != n+3 {
		t.Errorf("racing submits with one key: %d created, %d jobs; want 1 and %d", made, c.jobCount(), n+3)
	}

	// Cancelling a running job stops its allocations.
	c.mustJSON(teamA, "DELETE", "/v1/jobs/"+a.ID, nil, 200, &cancelled)
	if cancelled.State != model.JobCancelled || len(cancelled.Allocations) == 0 {
		t.Fatalf("cancel running: %+v", cancelled)
	}
	for _, al := range cancelled.Allocations {
		if !al.Stopping || al.StopReason != "cancelled" {
			t.Errorf("allocation %s after cancel: stopping %t reason %q", al.ID, al.Stopping, al.StopReason)
		}
	}
}

func TestAPIDeploymentsAndQuotas(t *testing.T) {
	c := newCluster(t)
	teamA := c.token("team:a")

	var created struct {
		ID         string         `json:"deployment_id"`
		Deployment api.Deployment `json:"deployment"`
	}
	c.mustJSON(teamA, "POST", "/v1/deployments", api.DeploymentRequest{Name: "chat-a", Model: "llama",
		ReplicaShape: api.ReplicaShape{GPUs: 2, Topology: "node"}, MinReplicas: 1, MaxReplicas: 4, Image: "srv"}, 201, &created)
	if created.ID != "chat-a" || created.Deployment.Team != "a" || created.Deployment.Target != 1 {
		t.Fatalf("create: %+v", created)
	}
	status, data := c.raw(teamA, "POST", "/v1/deployments", api.DeploymentRequest{Name: "chat-a",
		ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MaxReplicas: 1})
	if e := c.apiError(data); status != 409 || e.Code != "conflict" {
		t.Errorf("duplicate deployment: %d %+v, want 409", status, e)
	}
	c.waitActual("chat-a", 1)
	var scaled api.Deployment
	c.mustJSON(teamA, "PATCH", "/v1/deployments/chat-a", api.ScaleRequest{Desired: intp(3)}, 200, &scaled)
	if scaled.Desired != 3 || scaled.Target != 3 {
		t.Errorf("PATCH: desired %d target %d, want 3 and 3", scaled.Desired, scaled.Target)
	}
	d := c.waitActual("chat-a", 3)
	if d.Pending != nil {
		t.Errorf("fully placed deployment has a pending reason: %+v", d.Pending)
	}
	c.mustJSON(teamA, "PATCH", "/v1/deployments/chat-a", api.ScaleRequest{Desired: intp(10)}, 200, &scaled)
	if scaled.Target != 4 {
		t.Errorf("desired 10 over max 4: target %d, want 4", scaled.Target)
	}
	c.waitActual("chat-a", 4)
	var dl api.DeploymentList
	for _, tok := range []string{c.admin, teamA} {
		c.mustJSON(tok, "GET", "/v1/deployments", nil, 200, &dl)
		if len(dl.Deployments) != 1 || dl.Deployments[0].ID != "chat-a" || dl.Deployments[0].Actual != 4 {
			t.Errorf("list: %+v", dl.Deployments)
		}
	}
	status, _ = c.raw(teamA, "GET", "/v1/deployments/nope", nil)
	if status != 404 {
		t.Errorf("missing deployment: %d, want 404", status)
	}

	// Quotas, and a quota refusal naming the quota.
	var q api.Quota
	c.mustJSON(c.admin, "PUT", "/v1/quotas/default/q", api.QuotaRequest{GuaranteedGPUs: 2, MaxGPUs: 4}, 200, &q)
	if q.Scope != "default/q" || q.GuaranteedGPUs != 2 || q.MaxGPUs != 4 {
		t.Errorf("PUT quota: %+v", q)
	}
	c.mustJSON(c.admin, "GET", "/v1/quotas/default/q", nil, 200, &q)
	if q.Scope != "default/q" || q.GuaranteedGPUs != 2 || q.MaxGPUs != 4 {
		t.Errorf("GET quota: %+v", q)
	}
	var ql api.QuotaList
	c.mustJSON(c.admin, "GET", "/v1/quotas", nil, 200, &ql)
	if len(ql.Quotas) != 1 || ql.Quotas[0].Scope != "default/q" {
		t.Errorf("quota list: %+v", ql.Quotas)
	}
	status, data = c.raw(c.admin, "PUT", "/v1/quotas/default/q", api.QuotaRequest{GuaranteedGPUs: 4, MaxGPUs: 2})
	if e := c.apiError(data); status != 400 || e.Field != "max_gpus" {
		t.Errorf("max below guaranteed: %d %+v, want 400 naming max_gpus", status, e)
	}
	teamQ := c.token("team:q")
	n := c.jobCount()
	for _, gpus := range []int{8, 3} {
		status, data = c.raw(teamQ, "POST", "/v1/jobs", api.JobRequest{Name: "over", Image: "x", GPUs: gpus, Topology: "any"})
		e := c.apiError(data)
		if status != 403 || e.Code != "quota" || e.Scope != "default/q" || !strings.Contains(e.Message, "default/q") {
			t.Errorf("%d GPUs over quota: %d %+v, want 403 quota naming default/q", gpus, status, e)
		}
	}
	if got := c.jobCount(); got != n {
		t.Errorf("quota refusals wrote jobs: %d, want %d", got, n)
	}
	c.waitRunning(c.submit(teamQ, api.JobRequest{Name: "within", Image: "x", GPUs: 2, Topology: "any"}).JobID)
	c.eventually("quota use", func() error {
		if err := c.getJSON(teamQ, "/v1/quotas/default/q", &q); err != nil {
			return err
		}
		if q.UsedGPUs != 2 {
			return fmt.Errorf("used %d, want 2", q.UsedGPUs)
		}
		return nil
	})
	c.mustJSON(c.admin, "DELETE", "/v1/quotas/default/q", nil, 204, nil)
	for _, m := range []string{"GET", "DELETE"} {
		if status, _ = c.raw(c.admin, m, "/v1/quotas/default/q", nil); status != 404 {
			t.Errorf("%s deleted quota: %d, want 404", m, status)
		}
	}
}

// checkTopology compares the topology's free sets with the node list.
func checkTopology(top api.Topology, nodes api.NodeList) error {
	free, total, empties := 0, 0, 0
	largestNode := 0
	type podSum struct{ free, empties int }
	pods := map[string]*podSum{}
	for _, n := range nodes.Nodes {
		if !n.Schedulable() {
			if _, ok := top.FreeByNode[n.ID]; ok {
				return fmt.Errorf("unschedulable node %s in free_by_node", n.ID)
			}
			continue
		}
		if got := top.FreeByNode[n.ID]; got != n.FreeGPUs {
			return fmt.Errorf("free_by_node[%s] = %d, node list says %d", n.ID, got, n.FreeGPUs)
		}
		free += n.FreeGPUs
		total += n.GPUs
		largestNode = max(largestNode, n.FreeGPUs)
		if pods[n.Pod] == nil {
			pods[n.Pod] = &podSum{}
		}
		pods[n.Pod].free += n.FreeGPUs
		if n.FreeGPUs == n.GPUs {
			empties++
			pods[n.Pod].empties++
		}
	}
	// A gang that is a multiple of the node size takes whole nodes.
	placeable := func(free, empties int) int {
		if free > 0 && free%8 == 0 && free > empties*8 {
			return free - 1
		}
		return free
	}
	largestPod := 0
	for _, p := range pods {
		largestPod = max(largestPod, placeable(p.free, p.empties))
	}
	want := api.Largest{Node: largestNode, Pod: largestPod, Any: placeable(free, empties)}
	if top.LargestPlaceable != want {
		return fmt.Errorf("largest_placeable %+v, nodes say %+v", top.LargestPlaceable, want)
	}
	if top.FreeGPUs != free || top.TotalGPUs != total || top.FreeNodesFull != empties || len(top.FreeByNode) != countSched(nodes) {
		return fmt.Errorf("topology %+v, nodes say free %d total %d empty nodes %d", top, free, total, empties)
	}
	return nil
}

func countSched(nodes api.NodeList) int {
	n := 0
	for _, x := range nodes.Nodes {
		if x.Schedulable() {
			n++
		}
	}
	return n
}

// waitTopology polls until the topology agrees with the node list and
// accept accepts it.
func (c *cluster) waitTopology(what string, accept func(api.Topology) error) api.Topology {
	c.t.Helper()
	var top api.Topology
	c.eventually("topology "+what, func() error {
		var nodes api.NodeList
		top = api.Topology{}
		if err := c.getJSON(c.admin, "/v1/cluster/topology", &top); err != nil {
			return err
		}
		if err := c.getJSON(c.admin, "/v1/nodes", &nodes); err != nil {
			return err
		}
		if err := checkTopology(top, nodes); err != nil {
			return err
		}
		return accept(top)
	})
	return top
}

func TestAPIClusterNodesAndDocs(t *testing.T) {
	c := newCluster(t)
	c.waitTopology("idle", func(top api.Topology) error {
		if want := (api.Largest{Node: 8, Pod: 16, Any: 24}); top.LargestPlaceable != want {
			return fmt.Errorf("idle largest_placeable %+v, want %+v", top.LargestPlaceable, want)
		}
		return nil
	})
	j := c.waitRunning(c.submit(c.admin, api.JobRequest{Name: "part", Team: "a", Image: "x", GPUs: 3, Topology: "node"}).JobID)
	c.waitTopology("with a 3-GPU job", func(top api.Topology) error {
		if top.AllocatedGPUs != 3 || top.FreeGPUs != 21 || top.LargestPlaceable.Node != 8 {
			return fmt.Errorf("allocated %d free %d largest %+v", top.AllocatedGPUs, top.FreeGPUs, top.LargestPlaceable)
		}
		return nil
	})
	busy := j.Allocations[0].NodeID

	// Node actions: each answers with the node and shows in the list and
	// the topology.
	var node api.Node
	for _, step := range []struct {
		action            string
		drain, quarantine bool
	}{
		{"drain", true, false}, {"undrain", false, false}, {"quarantine", false, true}, {"unquarantine", false, false},
	} {
		var got model.Node
		c.mustJSON(c.admin, "POST", "/v1/nodes/"+busy+"/"+step.action, nil, 200, &got)
		if got.ID != busy || got.Draining != step.drain || got.Quarantined != step.quarantine {
			t.Errorf("%s: node %+v", step.action, got)
		}
		node = api.Node{}
		c.mustJSON(c.admin, "GET", "/v1/nodes/"+busy, nil, 200, &node)
		if node.Draining != step.drain || node.Quarantined != step.quarantine {
			t.Errorf("after %s: GET node %+v", step.action, node)
		}
		c.waitTopology("after "+step.action, func(top api.Topology) error {
			if _, ok := top.FreeByNode[busy]; ok == (step.drain || step.quarantine) {
				return fmt.Errorf("free_by_node has %s: %t", busy, ok)
			}
			return nil
		})
	}
	// Quarantine moved the job's work off the node.
	c.waitJob(j.ID, "stopped on the quarantined node", func(j api.Job) error {
		for _, a := range j.Allocations {
			if a.NodeID == busy && !a.Stopping {
				return fmt.Errorf("allocation %s on %s not stopping", a.ID, busy)
			}
		}
		return nil
	})
	for _, tc := range []struct{ path string }{{"/v1/nodes/" + busy + "/reboot"}, {"/v1/nodes/n-none/drain"}} {
		status, data := c.raw(c.admin, "POST", tc.path, nil)
		if e := c.apiError(data); status != 404 {
			t.Errorf("POST %s: %d %+v, want 404", tc.path, status, e)
		}
	}
	if status, _ := c.raw(c.admin, "GET", "/v1/nodes/n-none", nil); status != 404 {
		t.Errorf("GET missing node: %d, want 404", status)
	}

	// Health, readiness, leader.
	for _, p := range []string{"/healthz", "/readyz"} {
		if status, data := c.raw("", "GET", p, nil); status != 200 {
			t.Errorf("%s: %d %s", p, status, data)
		}
	}
	var l api.Leader
	c.mustJSON(c.admin, "GET", "/v1/leader", nil, 200, &l)
	if !l.IsSelf || l.Fence == 0 || l.Leader == "" {
		t.Errorf("leader: %+v", l)
	}

	// Tokens.
	var tok api.Token
	c.mustJSON(c.admin, "POST", "/v1/tokens", api.TokenRequest{Role: "team:chat"}, 201, &tok)
	if tok.Secret == "" || tok.Role != "team:chat" {
		t.Errorf("token: %+v", tok)
	}
	for _, role := range []string{"", "root", "team:", "admin:x", "agent"} {
		status, data := c.raw(c.admin, "POST", "/v1/tokens", api.TokenRequest{Role: role})
		if e := c.apiError(data); status != 400 || e.Field != "role" {
			t.Errorf("token role %q: %d %+v, want 400 naming role", role, status, e)
		}
	}

	// The OpenAPI document lists every route.
	status, data := c.raw("", "GET", "/v1/openapi.json", nil)
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if status != 200 || json.Unmarshal(data, &doc) != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi: %d, openapi %q", status, doc.OpenAPI)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/v1/leader",
		"/v1/jobs", "/v1/jobs/{id}", "/v1/deployments", "/v1/deployments/{id}", "/v1/cluster/topology",
		"/v1/nodes", "/v1/nodes/{id}", "/v1/nodes/{id}/{action}", "/v1/quotas", "/v1/quotas/{scope}",
		"/v1/alerts", "/v1/alerts/{id}", "/v1/alerts/{id}/actions/{action}", "/v1/tokens", "/v1/agent/heartbeat",
		"/v1/jobs/{id}/logs", "/v1/deployments/{id}/logs", "/v1/agent/logs/poll", "/v1/agent/logs/reply", "/v1/usage", "/v1/history"} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("openapi: no path %s", p)
		}
	}

	// Metrics.
	status, data = c.raw("", "GET", "/metrics", nil)
	for _, want := range []string{`berth_largest_placeable_gpus{topology="node"}`, `berth_largest_placeable_gpus{topology="any"}`,
		"berth_plan_seconds", "berth_pass_seconds_count", "berth_leader 1"} {
		if status != 200 || !strings.Contains(string(data), want) {
			t.Errorf("metrics: %d, no %q", status, want)
		}
	}

	var alerts AlertList
	c.mustJSON(c.admin, "GET", "/v1/alerts", nil, 200, &alerts)
	if alerts.Alerts == nil {
		t.Errorf("alerts: null list")
	}
	if status, _ := c.raw(c.admin, "GET", "/v1/alerts/a-none", nil); status != 404 {
		t.Errorf("missing alert: %d, want 404", status)
	}
}

func TestRestartKeepsTable(t *testing.T) {
	c := newCluster(t)
	teamA := c.token("team:a")
	running := []string{
		c.submit(teamA, api.JobRequest{Name: "r1", Image: "x", GPUs: 8, Topology: "node"}).JobID,
		c.submit(teamA, api.JobRequest{Name: "r2", Image: "x", GPUs: 4, Topology: "pod"}).JobID,
	}
	for _, id := range running {
		c.waitRunning(id)
	}
	pending := c.submit(c.admin, api.JobRequest{Name: "p", Team: "c", Image: "x", GPUs: 24, Topology: "any"}).JobID
	cancelled := c.submit(teamA, api.JobRequest{Name: "gone", Image: "x", GPUs: 1, Topology: "any"}).JobID
	c.mustJSON(teamA, "DELETE", "/v1/jobs/"+cancelled, nil, 200, nil)
	c.mustJSON(teamA, "POST", "/v1/deployments", api.DeploymentRequest{Name: "svc", ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"},
		MinReplicas: 2, MaxReplicas: 3, Image: "srv"}, 201, nil)
	c.waitActual("svc", 2)
	c.mustJSON(c.admin, "PUT", "/v1/quotas/default/q", api.QuotaRequest{GuaranteedGPUs: 3, MaxGPUs: 5}, 200, nil)
	c.waitJob(pending, "pending with a reason", func(j api.Job) error {
		if j.PendingReason == nil || j.PendingReason.Code == "queued" {
			return fmt.Errorf("reason %+v", j.PendingReason)
		}
		return nil
	})

	type view struct {
		Jobs        map[string]api.Job
		Deployments []api.Deployment
		Quotas      []api.Quota
	}
	read := func() view {
		v := view{Jobs: map[string]api.Job{}}
		for _, id := range append([]string{pending, cancelled}, running...) {
			var j api.Job
			c.mustJSON(c.admin, "GET", "/v1/jobs/"+id, nil, 200, &j)
			j.PendingReason, j.EffectivePrio, j.QueuePosition, j.ETA, j.Reservation = nil, nil, 0, nil, nil
			v.Jobs[id] = j
		}
		var dl api.DeploymentList
		c.mustJSON(c.admin, "GET", "/v1/deployments", nil, 200, &dl)
		v.Deployments = dl.Deployments
		var ql api.QuotaList
		c.mustJSON(c.admin, "GET", "/v1/quotas", nil, 200, &ql)
		v.Quotas = ql.Quotas
		return v
	}
	before, table := read(), c.tableState()
	if len(before.Jobs[running[0]].Allocations) == 0 || len(before.Jobs[running[1]].Allocations) == 0 {
		t.Fatalf("running jobs without allocations before the restart: %+v", before.Jobs)
	}

	c.restart()
	c.waitNodes()
	after := read()
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("after restart (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(table, c.tableState()); diff != "" {
		t.Errorf("table after restart (-before +after):\n%s", diff)
	}
	// The old tokens work; no new bootstrap token was made.
	var l api.JobList
	c.mustJSON(teamA, "GET", "/v1/jobs", nil, 200, &l)
	if len(l.Jobs) != 3 {
		t.Errorf("team a sees %d jobs after the restart, want 3", len(l.Jobs))
	}
	// And the restarted server keeps scheduling.
	c.waitRunning(c.submit(teamA, api.JobRequest{Name: "after", Image: "x", GPUs: 1, Topology: "any"}).JobID)
	c.mu.Lock()
	boots := len(c.bootstrap)
	c.mu.Unlock()
	if boots != 1 {
		t.Errorf("Bootstrap called %d times across two starts, want 1", boots)
	}
}

// TestDesignRequestsAsWritten: §3's own example requests are accepted as
// the design writes them: a job with checkpoint {path, interval} and no
// bytes (the deadline then uses the measured size), and a deployment with
// a model and no name (the name is derived from the model).
func TestDesignRequestsAsWritten(t *testing.T) {
	c := newCluster(t)
	var acc api.JobAccepted
	c.mustJSON(c.admin, "POST", "/v1/jobs", `{ "name": "pretrain", "image": "registry/pretrain:1", "gpus": 16, "topology": "pod",
	  "priority": 100, "max_runtime": "72h",
	  "checkpoint": {"path": "/ckpt/pretrain", "interval": "10m"},
	  "preemptible": true }`, 202, &acc)
	if acc.JobID == "" || acc.QueuePosition < 1 {
		t.Fatalf("§3 job: %+v", acc)
	}
	var j api.Job
	c.mustJSON(c.admin, "GET", "/v1/jobs/"+acc.JobID, nil, 200, &j)
	if j.Checkpoint == nil || j.Checkpoint.Interval != 10*time.Minute || j.Checkpoint.SizeBytes != 0 || !j.Preemptible {
		t.Errorf("§3 job as stored: checkpoint %+v", j.Checkpoint)
	}
	var out struct {
		ID string `json:"deployment_id"`
	}
	c.mustJSON(c.admin, "POST", "/v1/deployments", `{ "model": "Llama-3.1-70B/Instruct", "image": "srv",
	  "replica_shape": {"gpus": 4, "topology": "node"},
	  "min_replicas": 1, "max_replicas": 6, "priority": 1000 }`, 201, &out)
	if out.ID != "llama-3.1-70b-instruct" {
		t.Errorf("deployment named from its model: %q", out.ID)
	}
	// The same model again: the derived name is taken, and the answer
	// says to set a name.
	status, data := c.raw(c.admin, "POST", "/v1/deployments", `{"model": "Llama-3.1-70B/Instruct", "image": "srv",
	  "replica_shape": {"gpus": 4, "topology": "node"}, "max_replicas": 1}`)
	if status != 409 || !strings.Contains(string(data), "already exists") {
		t.Errorf("second deployment of the same model: %d %s", status, data)
	}
}

// TestAPIJobPages: GET /v1/jobs pages through the table in submit order
// with a continue token, filters on the server, keeps a team to its own
// jobs across pages, and names the bad parameter. A submit's queue
// position counts the pending jobs ahead of it.
func TestAPIJobPages(t *testing.T) {
	c := newCluster(t)
	teamA := c.token("team:a")
	// The blocker takes pod p1's 16 GPUs; p2 has 8, so every 16-GPU pod
	// job after it stays pending and the positions only grow.
	blocker := c.waitRunning(c.submit(c.admin, api.JobRequest{Name: "blocker", Team: "c", GPUs: 16, Topology: "pod"}).JobID)
	want := []string{blocker.ID}
	var wantA []string
	for i := 0; i < 12; i++ {
		team, tok := "b", c.admin
		if i%2 == 0 {
			team, tok = "a", teamA
		}
		acc := c.submit(tok, api.JobRequest{Name: fmt.Sprintf("p%d", i%3), Team: team, GPUs: 16, Topology: "pod", Priority: 0})
		want = append(want, acc.JobID)
		if team == "a" {
			wantA = append(wantA, acc.JobID)
		}
		if acc.QueuePosition != i+1 {
			t.Errorf("submit %d: queue position %d, want %d (every earlier job is pending at the same priority)", i, acc.QueuePosition, i+1)
		}
	}
	pages := func(token string, q url.Values) ([]string, []int) {
		var ids []string
		var sizes []int
		for n := 0; n < 20; n++ {
			l := c.listJobs(token, q)
			ids = append(ids, jobIDs(l)...)
			sizes = append(sizes, len(l.Jobs))
			if l.Continue == "" {
				return ids, sizes
			}
			q.Set("continue", l.Continue)
		}
		t.Fatalf("no last page after 20")
		return nil, nil
	}
	ids, sizes := pages(c.admin, url.Values{"limit": {"5"}})
	if diff := cmp.Diff(want, ids); diff != "" || !slices.Equal(sizes, []int{5, 5, 3}) {
		t.Errorf("admin, pages of 5: sizes %v (-want +got):\n%s", sizes, diff)
	}
	ids, sizes = pages(teamA, url.Values{"limit": {"4"}})
	if diff := cmp.Diff(wantA, ids); diff != "" || !slices.Equal(sizes, []int{4, 2}) {
		t.Errorf("team a, pages of 4: sizes %v (-want +got):\n%s", sizes, diff)
	}
	if ids, _ := pages(c.admin, url.Values{"state": {"running,pending"}, "name": {"p1"}, "limit": {"2"}}); len(ids) != 4 {
		t.Errorf("name p1, pending or running: %v, want the 4 jobs of that name", ids)
	}
	if l := c.listJobs(c.admin, nil); len(l.Jobs) != 13 || l.Continue != "" {
		t.Errorf("default page: %d jobs, continue %q; want all 13 and no token", len(l.Jobs), l.Continue)
	}
	for _, q := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=5001", "limit"}, {"limit=ten", "limit"},
		{"continue=%21%21", "continue"}, {"continue=bm90LWEtdG9rZW4", "continue"}, {"state=pending,zombie", "state"},
	} {
		status, data := c.raw(c.admin, "GET", "/v1/jobs?"+q.query, nil)
		if e := c.apiError(data); status != 400 || e.Field != q.field {
			t.Errorf("GET /v1/jobs?%s: %d %+v, want 400 naming %s", q.query, status, e, q.field)
		}
	}
}

// TestFinishedJobsCompact: a finished job stays in the table for the job
// retention, then only its usage record is left: it leaves the lists,
// and job show reads it from the record (for its own team only), while
// jobs that have not finished stay.
func TestFinishedJobsCompact(t *testing.T) {
	c := newClusterWith(t, func(cfg *control.Config) { cfg.JobRetention = 2 * time.Second })
	teamA, teamB := c.token("team:a"), c.token("team:b")
	// The blocker takes pod p1; 16-GPU pod jobs after it wait.
	c.waitRunning(c.submit(teamA, api.JobRequest{Name: "blocker", GPUs: 16, Topology: "pod"}).JobID)
	done := c.submit(teamA, api.JobRequest{Name: "short-lived", GPUs: 16, Topology: "pod"})
	live := c.submit(teamA, api.JobRequest{Name: "still-waiting", GPUs: 16, Topology: "pod"})
	c.mustJSON(teamA, "DELETE", "/v1/jobs/"+done.JobID, nil, 200, nil)
	var j api.Job
	c.mustJSON(teamA, "GET", "/v1/jobs/"+done.JobID, nil, 200, &j)
	if j.Compacted || len(j.History) == 0 {
		t.Fatalf("just cancelled: compacted %v, %d events; want the whole job", j.Compacted, len(j.History))
	}
	c.eventually("the cancelled job compacted", func() error {
		if l := c.listJobs(c.admin, nil); slices.Contains(jobIDs(l), done.JobID) {
			return fmt.Errorf("still listed: %v", jobIDs(l))
		}
		return nil
	})
	j = api.Job{}
	c.mustJSON(teamA, "GET", "/v1/jobs/"+done.JobID, nil, 200, &j)
	if !j.Compacted || j.State != model.JobCancelled || j.Name != "short-lived" || j.Team != "a" || j.Shape.GPUs != 16 ||
		j.FinishedAt.IsZero() || len(j.History) != 0 {
		t.Errorf("compacted view: %+v", j)
	}
	if status, _ := c.raw(teamB, "GET", "/v1/jobs/"+done.JobID, nil); status != 404 {
		t.Errorf("another team reads a compacted job: %d, want 404", status)
	}
	j = api.Job{}
	c.mustJSON(teamA, "GET", "/v1/jobs/"+live.JobID, nil, 200, &j)
	if j.Compacted || j.State != model.JobPending {
		t.Errorf("a pending job older than the retention: %+v", j)
	}
}

// TestProfilesAdminOnly: runtime profiles show the table's ids, so only
// an admin token gets one.
func TestProfilesAdminOnly(t *testing.T) {
	c := newCluster(t)
	for _, tc := range []struct {
		token string
		want  int
	}{{c.admin, 200}, {c.token("team:a"), 403}, {"", 401}} {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=1"} {
			if status, _ := c.raw(tc.token, "GET", path, nil); status != tc.want {
				t.Errorf("GET %s as %q: %d, want %d", path, tc.token, status, tc.want)
			}
		}
	}
}
