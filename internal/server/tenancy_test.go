package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"github.com/google/go-cmp/cmp"
)

// tenants is the tenancy fixture: one token per role and objects owned by
// teams a and b.
type tenants struct {
	c                        *cluster
	tok                      map[string]string // role name → secret
	aJob, aPending, bJob     string
	aDep, aDep2, bDep, alert string
	roles                    []string // the non-admin roles
	autoscaler               string
}

func newTenants(t *testing.T) *tenants {
	c := newCluster(t)
	tn := &tenants{c: c, tok: map[string]string{}, aDep: "chat-a", aDep2: "embed-a", bDep: "chat-b"}
	tn.autoscaler = "autoscaler:" + tn.aDep
	tn.roles = []string{"team:a", "team:b", tn.autoscaler, "agent:n1"}
	for _, r := range tn.roles {
		tn.tok[r] = c.token(r)
	}
	tn.aJob = c.submit(tn.tok["team:a"], api.JobRequest{Name: "a-train", Image: "x", GPUs: 2, Topology: "node"}).JobID
	tn.aPending = c.submit(tn.tok["team:a"], api.JobRequest{Name: "a-huge", Image: "x", GPUs: 24, Topology: "any"}).JobID
	tn.bJob = c.submit(tn.tok["team:b"], api.JobRequest{Name: "b-train", Image: "x", GPUs: 2, Topology: "node"}).JobID
	for _, d := range []struct{ team, id string }{{"team:a", tn.aDep}, {"team:a", tn.aDep2}, {"team:b", tn.bDep}} {
		c.mustJSON(tn.tok[d.team], "POST", "/v1/deployments", api.DeploymentRequest{Name: d.id, Image: "srv",
			ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MinReplicas: 1, MaxReplicas: 3}, 201, nil)
	}
	c.mustJSON(c.admin, "PUT", "/v1/quotas/default/a", api.QuotaRequest{GuaranteedGPUs: 40}, 200, nil)
	c.mustJSON(c.admin, "PUT", "/v1/quotas/default/b", api.QuotaRequest{GuaranteedGPUs: 40}, 200, nil)
	c.waitRunning(tn.aJob)
	c.waitRunning(tn.bJob)
	for _, d := range []string{tn.aDep, tn.aDep2, tn.bDep} {
		c.waitActual(d, 1)
	}
	tn.alert = "a-none"
	if as := c.instance().Controller.Alerts(); len(as) > 0 {
		tn.alert = as[0].ID
	}
	return tn
}

// probe is one request and the roles that must be refused it.
type probe struct {
	method, path string
	body         any
	refuse       []string // roles; "*" is every non-admin role
}

func (tn *tenants) probes() []probe {
	all := []string{"*"}
	notTeams := []string{tn.autoscaler, "agent:n1"}
	notA := []string{"team:b", tn.autoscaler, "agent:n1"}
	notB := []string{"team:a", tn.autoscaler, "agent:n1"}
	hb := func(node string) api.Heartbeat {
		return api.Heartbeat{NodeID: node, BootEpoch: 7, Pod: "p9", Model: "H100", GPUs: 8}
	}
	job := func(team string) api.JobRequest {
		return api.JobRequest{Name: "intruder", Team: team, Image: "x", GPUs: 1, Topology: "any"}
	}
	dep := func(name, team string) api.DeploymentRequest {
		return api.DeploymentRequest{Name: name, Team: team, Image: "x", ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MaxReplicas: 1}
	}
	scale := api.ScaleRequest{Desired: intp(3)}
	ps := []probe{
		{"POST", "/v1/jobs", job("a"), notA},
		{"POST", "/v1/jobs", job("b"), notB},
		{"POST", "/v1/jobs", job(""), notTeams},
		{"GET", "/v1/jobs?team=a", nil, notA},
		{"GET", "/v1/jobs?team=b&state=running", nil, notB},
		{"GET", "/v1/jobs", nil, notTeams},
		{"POST", "/v1/deployments", dep("intruder-a", "a"), notA},
		{"POST", "/v1/deployments", dep("intruder-b", "b"), notB},
		{"POST", "/v1/deployments", dep("intruder", ""), notTeams},
		{"GET", "/v1/deployments/" + tn.aDep, nil, []string{"team:b", "agent:n1"}},
		{"PATCH", "/v1/deployments/" + tn.aDep, scale, []string{"team:b", "agent:n1"}},
		{"DELETE", "/v1/deployments/" + tn.aDep, nil, notA},
		{"GET", "/v1/deployments/" + tn.aDep2, nil, notA},
		{"PATCH", "/v1/deployments/" + tn.aDep2, scale, notA},
		{"DELETE", "/v1/deployments/" + tn.aDep2, nil, notA},
		{"GET", "/v1/deployments/" + tn.bDep, nil, notB},
		{"PATCH", "/v1/deployments/" + tn.bDep, scale, notB},
		{"DELETE", "/v1/deployments/" + tn.bDep, nil, notB},
		{"GET", "/v1/deployments/no-such", nil, []string{"agent:n1"}},
		{"PATCH", "/v1/deployments/no-such", scale, []string{tn.autoscaler, "agent:n1"}},
		{"GET", "/v1/nodes", nil, notTeams},
		{"GET", "/v1/nodes/n1", nil, notTeams},
		{"GET", "/v1/quotas", nil, notTeams},
		{"GET", "/v1/quotas/default/a", nil, notA},
		{"GET", "/v1/quotas/default/b", nil, notB},
		{"PUT", "/v1/quotas/default/a", api.QuotaRequest{GuaranteedGPUs: 99}, all},
		{"PUT", "/v1/quotas/default/b", api.QuotaRequest{GuaranteedGPUs: 99}, all},
		{"PUT", "/v1/quotas/default/new", api.QuotaRequest{GuaranteedGPUs: 1}, all},
		{"DELETE", "/v1/quotas/default/a", nil, all},
		{"DELETE", "/v1/quotas/default/b", nil, all},
		{"GET", "/v1/alerts", nil, all},
		{"GET", "/v1/alerts/" + tn.alert, nil, all},
		{"POST", "/v1/alerts/" + tn.alert + "/actions/accept_degraded", nil, all},
		{"POST", "/v1/tokens", api.TokenRequest{Role: "admin"}, all},
		{"POST", "/v1/tokens", api.TokenRequest{Role: "team:a"}, all},
		{"POST", "/v1/tokens", api.TokenRequest{Role: "agent:n2"}, all},
		{"POST", "/v1/agent/heartbeat", hb("n2"), all},
		{"POST", "/v1/agent/heartbeat", hb("n-new"), all},
		{"POST", "/v1/agent/heartbeat", hb("n1"), []string{"team:a", "team:b", tn.autoscaler}},
	}
	for _, id := range []string{tn.aJob, tn.aPending} {
		ps = append(ps, probe{"GET", "/v1/jobs/" + id, nil, notA}, probe{"DELETE", "/v1/jobs/" + id, nil, notA})
	}
	ps = append(ps, probe{"GET", "/v1/jobs/" + tn.bJob, nil, notB}, probe{"DELETE", "/v1/jobs/" + tn.bJob, nil, notB})
	for _, n := range []string{"n1", "n2", "n-none"} {
		for _, act := range []string{"drain", "undrain", "quarantine", "unquarantine"} {
			ps = append(ps, probe{"POST", "/v1/nodes/" + n + "/" + act, nil, all})
		}
	}
	return ps
}

func refuses(p probe, role string) bool {
	for _, r := range p.refuse {
		if r == "*" || r == role {
			return true
		}
	}
	return false
}

// TestTenancyMatrix: every endpoint, every non-admin role, acting outside
// its scope: zero successes, and the table is unchanged.
func TestTenancyMatrix(t *testing.T) {
	tn := newTenants(t)
	c := tn.c
	before := c.tableState()
	var leaks []string
	refused := 0
	for _, p := range tn.probes() {
		for _, role := range tn.roles {
			if !refuses(p, role) {
				continue
			}
			refused++
			status, data := c.raw(tn.tok[role], p.method, p.path, p.body)
			if status < 300 {
				leaks = append(leaks, fmt.Sprintf("%s %s %s as %s: %d %.200s", p.method, p.path, bodyOf(p.body), role, status, data))
				continue
			}
			if e := c.apiError(data); status != 403 || e.Code != "forbidden" || e.Scope == "" {
				t.Errorf("%s %s as %s: %d %+v, want 403 forbidden naming the scope it lacks", p.method, p.path, role, status, e)
			}
		}
	}
	for _, l := range leaks {
		t.Errorf("out of scope request succeeded: %s", l)
	}
	if refused < 150 {
		t.Errorf("only %d out-of-scope probes: the matrix lost rows", refused)
	}
	if diff := cmp.Diff(before, c.tableState()); diff != "" {
		t.Errorf("refused requests changed the table (-before +after):\n%s", diff)
	}
}

func bodyOf(b any) string {
	if b == nil {
		return ""
	}
	data, _ := json.Marshal(b)
	return string(data)
}

// TestTenancyLists: lists are filtered to what the role may see.
func TestTenancyLists(t *testing.T) {
	tn := newTenants(t)
	c := tn.c
	for _, tc := range []struct {
		role             string
		jobs, deps, quot []string
	}{
		{"team:a", []string{tn.aJob, tn.aPending}, []string{tn.aDep, tn.aDep2}, []string{"default/a"}},
		{"team:b", []string{tn.bJob}, []string{tn.bDep}, []string{"default/b"}},
		{tn.autoscaler, nil, []string{tn.aDep}, nil},
		{"agent:n1", nil, []string{}, nil},
	} {
		tok := tn.tok[tc.role]
		if tc.jobs != nil {
			var l api.JobList
			c.mustJSON(tok, "GET", "/v1/jobs", nil, 200, &l)
			if diff := cmp.Diff(tc.jobs, jobIDs(l)); diff != "" {
				t.Errorf("%s: GET /v1/jobs (-want +got):\n%s", tc.role, diff)
			}
		}
		var dl api.DeploymentList
		c.mustJSON(tok, "GET", "/v1/deployments", nil, 200, &dl)
		got := []string{}
		for _, d := range dl.Deployments {
			got = append(got, d.ID)
		}
		if diff := cmp.Diff(tc.deps, got); diff != "" {
			t.Errorf("%s: GET /v1/deployments (-want +got):\n%s", tc.role, diff)
		}
		if tc.quot != nil {
			var ql api.QuotaList
			c.mustJSON(tok, "GET", "/v1/quotas", nil, 200, &ql)
			got := []string{}
			for _, q := range ql.Quotas {
				got = append(got, q.Scope)
			}
			if diff := cmp.Diff(tc.quot, got); diff != "" {
				t.Errorf("%s: GET /v1/quotas (-want +got):\n%s", tc.role, diff)
			}
		}
	}
}

// TestTenancyInScope: what each role may do, it can; team submits are
// forced to the team.
func TestTenancyInScope(t *testing.T) {
	tn := newTenants(t)
	c := tn.c
	teamA := tn.tok["team:a"]

	// A team submit without a team is the token's team; naming its own
	// team is fine; naming another is 403 and writes nothing.
	for _, team := range []string{"", "a"} {
		acc := c.submit(teamA, api.JobRequest{Name: "mine", Team: team, Image: "x", GPUs: 1, Topology: "any"})
		var j api.Job
		c.mustJSON(c.admin, "GET", "/v1/jobs/"+acc.JobID, nil, 200, &j)
		if j.Team != "a" || !strings.Contains(j.Owner, "team:a") {
			t.Errorf("team a's submit with team %q: job team %q owner %q", team, j.Team, j.Owner)
		}
	}
	n := c.jobCount()
	status, data := c.raw(teamA, "POST", "/v1/jobs", api.JobRequest{Name: "theirs", Team: "b", Image: "x", GPUs: 1, Topology: "any"})
	if e := c.apiError(data); status != 403 || e.Code != "forbidden" || e.Scope == "" {
		t.Errorf("team a submitting for b: %d %+v, want 403 forbidden with a scope", status, e)
	}
	status, data = c.raw(teamA, "POST", "/v1/deployments", api.DeploymentRequest{Name: "theirs", Team: "b", Image: "x",
		ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MaxReplicas: 1})
	if e := c.apiError(data); status != 403 || e.Code != "forbidden" {
		t.Errorf("team a creating a deployment for b: %d %+v, want 403", status, e)
	}
	if got := c.jobCount(); got != n {
		t.Errorf("refused submit wrote a job: %d jobs, want %d", got, n)
	}

	// The autoscaler scales its deployment and nothing else.
	var d api.Deployment
	c.mustJSON(tn.tok[tn.autoscaler], "PATCH", "/v1/deployments/"+tn.aDep, api.ScaleRequest{Desired: intp(2)}, 200, &d)
	if d.Desired != 2 {
		t.Errorf("autoscaler PATCH: desired %d", d.Desired)
	}
	c.waitActual(tn.aDep, 2)
	// The agent heartbeats as its node.
	var o api.Orders
	c.mustJSON(tn.tok["agent:n1"], "POST", "/v1/agent/heartbeat", c.report(fakeNode{"n1", "p1"}), 200, &o)
	if o.NodeID != "n1" {
		t.Errorf("agent heartbeat orders for %q", o.NodeID)
	}
	// A team reads and cancels its own job, and reads its quota.
	c.mustJSON(teamA, "GET", "/v1/jobs/"+tn.aJob, nil, 200, nil)
	c.mustJSON(teamA, "GET", "/v1/quotas/default/a", nil, 200, nil)
	c.mustJSON(teamA, "DELETE", "/v1/jobs/"+tn.aPending, nil, 200, nil)
	c.mustJSON(tn.tok["team:b"], "DELETE", "/v1/deployments/"+tn.bDep, nil, 204, nil)
}

// TestUnauthenticated: every authenticated route is 401 without a valid
// bearer token, and nothing is written.
func TestUnauthenticated(t *testing.T) {
	tn := newTenants(t)
	c := tn.c
	before := c.tableState()
	seen := map[string]bool{}
	for _, p := range tn.probes() {
		key := p.method + " " + strings.SplitN(p.path, "?", 2)[0]
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer berth_bogus", "Basic YWRtaW46YWRtaW4=", c.admin} {
			status, data := c.rawAuth(auth, p.method, p.path, p.body)
			if status != 401 {
				t.Errorf("%s with Authorization %q: %d %.200s, want 401", key, auth, status, data)
				continue
			}
			if e := c.apiError(data); e.Code != "unauthorized" {
				t.Errorf("%s with Authorization %q: %+v", key, auth, e)
			}
		}
	}
	// The public endpoints stay public.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/openapi.json"} {
		if status, _ := c.raw("", "GET", p, nil); status != 200 {
			t.Errorf("GET %s without a token: %d", p, status)
		}
	}
	if diff := cmp.Diff(before, c.tableState()); diff != "" {
		t.Errorf("unauthenticated requests changed the table (-before +after):\n%s", diff)
	}
}

// rawAuth sends a request with a literal Authorization header ("" for none).
func (c *cluster) rawAuth(auth, method, path string, body any) (int, []byte) {
	c.t.Helper()
	if auth == "" {
		return c.raw("", method, path, body)
	}
	return c.raw("", method, path, body, "Authorization", auth)
}

// TestTenancyQuotaScope: a team token cannot step outside its quota by
// naming another org or user path.
func TestTenancyQuotaScope(t *testing.T) {
	c := newCluster(t)
	teamA := c.token("team:a")
	c.mustJSON(c.admin, "PUT", "/v1/quotas/default/a", api.QuotaRequest{GuaranteedGPUs: 2, MaxGPUs: 4}, 200, nil)
	n := c.jobCount()
	for _, req := range []api.JobRequest{
		{Name: "over", Image: "x", GPUs: 8, Topology: "any"},
		{Name: "over", Org: "default", Image: "x", GPUs: 8, Topology: "any"},
		{Name: "over", User: "me", Image: "x", GPUs: 8, Topology: "any"},
		{Name: "over", Org: "elsewhere", Image: "x", GPUs: 8, Topology: "any"},
	} {
		status, data := c.raw(teamA, "POST", "/v1/jobs", req)
		if status != 403 {
			t.Errorf("team a over its quota with org %q user %q: %d %.300s, want 403", req.Org, req.User, status, data)
		}
	}
	if got := c.jobCount(); got != n {
		t.Errorf("refused submits wrote %d jobs", got-n)
	}
}

// TestDashboardScopesDeploymentsByOrgAndTeam: two orgs each with a team
// called alpha. The dashboard shows each token its own deployments and
// none of the other's (it used to match the team's name alone: acme/alpha
// saw default/alpha's deployments, env included, and not its own).
func TestDashboardScopesDeploymentsByOrgAndTeam(t *testing.T) {
	c := newCluster(t)
	tokens := map[string]string{"alpha": c.token("team:alpha"), "acme/alpha": c.token("team:acme/alpha")}
	for scope, tok := range tokens {
		name := strings.ReplaceAll(scope, "/", "-") + "-svc"
		c.mustJSON(tok, "POST", "/v1/deployments", api.DeploymentRequest{Name: name, Model: "m",
			ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MinReplicas: 0, MaxReplicas: 1, Image: "srv",
			Env: map[string]string{"SECRET": scope}}, 201, nil)
	}
	for scope, tok := range tokens {
		var d struct {
			Deployments []api.Deployment `json:"deployments"`
		}
		c.mustJSON(tok, "GET", "/v1/dashboard", nil, 200, &d)
		want := strings.ReplaceAll(scope, "/", "-") + "-svc"
		if len(d.Deployments) != 1 || d.Deployments[0].ID != want {
			var got []string
			for _, x := range d.Deployments {
				got = append(got, x.ID)
			}
			t.Errorf("team:%s sees deployments %v on the dashboard, want only %s", scope, got, want)
		}
	}
}
