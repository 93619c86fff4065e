package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
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
	bToken                   string // team b's token id
}

func newTenants(t *testing.T) *tenants {
	c := newCluster(t)
	tn := &tenants{c: c, tok: map[string]string{}, aDep: "chat-a", aDep2: "embed-a", bDep: "chat-b"}
	tn.autoscaler = "autoscaler:" + tn.aDep
	// team:acme/a is a team of the same name in another org: it must see
	// nothing of default/a.
	tn.roles = []string{"team:a", "team:b", "team:acme/a", tn.autoscaler, "agent:n1"}
	for _, r := range tn.roles {
		if r != tn.autoscaler {
			tn.tok[r] = c.token(r)
		}
	}
	tn.aJob = c.submit(tn.tok["team:a"], api.JobRequest{Name: "a-train", Image: "x", GPUs: 2, Topology: "node"}).JobID
	tn.aPending = c.submit(tn.tok["team:a"], api.JobRequest{Name: "a-huge", Image: "x", GPUs: 24, Topology: "any"}).JobID
	tn.bJob = c.submit(tn.tok["team:b"], api.JobRequest{Name: "b-train", Image: "x", GPUs: 2, Topology: "node"}).JobID
	for _, d := range []struct{ team, id string }{{"team:a", tn.aDep}, {"team:a", tn.aDep2}, {"team:b", tn.bDep}} {
		c.mustJSON(tn.tok[d.team], "POST", "/v1/deployments", api.DeploymentRequest{Name: d.id, Image: "srv",
			ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MinReplicas: 1, MaxReplicas: 3}, 201, nil)
	}
	// An autoscaler token is bound to a deployment that exists.
	tn.tok[tn.autoscaler] = c.token(tn.autoscaler)
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
	var tl api.TokenList
	c.mustJSON(c.admin, "GET", "/v1/tokens", nil, 200, &tl)
	for _, tk := range tl.Tokens {
		if tk.Role == "team:b" {
			tn.bToken = tk.ID
		}
	}
	return tn
}

// probe is one request and the roles that must be refused it. hide marks
// an object of a team: a team that does not own it is answered 404, as
// for one that does not exist, so that the refusal confirms nothing.
type probe struct {
	method, path string
	body         any
	refuse       []string // roles; "*" is every non-admin role
	hide         bool
}

func (tn *tenants) probes() []probe {
	all := []string{"*"}
	except := func(keep ...string) []string {
		var out []string
		for _, r := range tn.roles {
			if !slices.Contains(keep, r) {
				out = append(out, r)
			}
		}
		return out
	}
	notTeams := except("team:a", "team:b", "team:acme/a")
	notA, notB := except("team:a"), except("team:b")
	hb := func(node string) api.Heartbeat {
		return api.Heartbeat{NodeID: node, BootEpoch: 7, Pod: "p9", Model: "H100", GPUs: 8}
	}
	job := func(org, team string) api.JobRequest {
		return api.JobRequest{Name: "intruder", Org: org, Team: team, Image: "x", GPUs: 1, Topology: "any"}
	}
	dep := func(name, team string) api.DeploymentRequest {
		return api.DeploymentRequest{Name: name, Team: team, Image: "x", ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MaxReplicas: 1}
	}
	scale := api.ScaleRequest{Desired: intp(3)}
	aScaler := except("team:a", tn.autoscaler)
	ps := []probe{
		{"POST", "/v1/jobs", job("default", "a"), notA, false},
		{"POST", "/v1/jobs", job("default", "b"), notB, false},
		{"POST", "/v1/jobs", job("", ""), notTeams, false},
		{"GET", "/v1/jobs?team=a", nil, except("team:a", "team:acme/a"), false},
		{"GET", "/v1/jobs?team=b&state=running", nil, notB, false},
		{"GET", "/v1/jobs", nil, notTeams, false},
		{"POST", "/v1/deployments", dep("intruder-a", "a"), notA, false},
		{"POST", "/v1/deployments", dep("intruder-b", "b"), notB, false},
		{"POST", "/v1/deployments", dep("intruder", ""), notTeams, false},
		{"GET", "/v1/deployments/" + tn.aDep, nil, aScaler, true},
		{"PATCH", "/v1/deployments/" + tn.aDep, scale, aScaler, true},
		{"DELETE", "/v1/deployments/" + tn.aDep, nil, notA, true},
		{"GET", "/v1/deployments/" + tn.aDep2, nil, notA, true},
		{"PATCH", "/v1/deployments/" + tn.aDep2, scale, notA, true},
		{"DELETE", "/v1/deployments/" + tn.aDep2, nil, notA, true},
		{"GET", "/v1/deployments/" + tn.bDep, nil, notB, true},
		{"PATCH", "/v1/deployments/" + tn.bDep, scale, notB, true},
		{"DELETE", "/v1/deployments/" + tn.bDep, nil, notB, true},
		{"GET", "/v1/deployments/no-such", nil, all, true},
		{"PATCH", "/v1/deployments/no-such", scale, all, true},
		{"GET", "/v1/nodes", nil, notTeams, false},
		{"GET", "/v1/nodes/n1", nil, notTeams, false},
		{"GET", "/v1/dashboard", nil, notTeams, false},
		{"GET", "/v1/quotas", nil, notTeams, false},
		{"GET", "/v1/quotas/default/a", nil, notA, true},
		{"GET", "/v1/quotas/default/b", nil, notB, true},
		{"PUT", "/v1/quotas/default/a", api.QuotaRequest{GuaranteedGPUs: 99}, all, false},
		{"PUT", "/v1/quotas/default/b", api.QuotaRequest{GuaranteedGPUs: 99}, all, false},
		{"PUT", "/v1/quotas/default/new", api.QuotaRequest{GuaranteedGPUs: 1}, all, false},
		{"DELETE", "/v1/quotas/default/a", nil, all, false},
		{"DELETE", "/v1/quotas/default/b", nil, all, false},
		{"GET", "/v1/alerts", nil, all, false},
		{"GET", "/v1/alerts/" + tn.alert, nil, all, false},
		{"POST", "/v1/alerts/" + tn.alert + "/actions/accept_degraded", nil, all, false},
		{"POST", "/v1/tokens", api.TokenRequest{Role: "admin"}, all, false},
		{"POST", "/v1/tokens", api.TokenRequest{Role: "team:a"}, all, false},
		{"POST", "/v1/tokens", api.TokenRequest{Role: "agent:n2"}, all, false},
		{"GET", "/v1/tokens", nil, all, false},
		{"DELETE", "/v1/tokens/" + tn.bToken, nil, all, false},
		{"POST", "/v1/agent/heartbeat", hb("n2"), all, false},
		{"POST", "/v1/agent/heartbeat", hb("n-new"), all, false},
		{"POST", "/v1/agent/heartbeat", hb("n1"), except("agent:n1"), false},
		{"GET", "/v1/usage", nil, notTeams, false},
		{"GET", "/v1/history", nil, notTeams, false},
		{"GET", "/v1/deployments/" + tn.aDep + "/logs", nil, notA, true},
		{"GET", "/v1/deployments/" + tn.bDep + "/logs?follow=true", nil, notB, true},
		{"POST", "/v1/agent/logs/poll", model.LogPoll{NodeID: "n2"}, all, false},
		{"POST", "/v1/agent/logs/poll", model.LogPoll{NodeID: "n1"}, except("agent:n1"), false},
		{"POST", "/v1/agent/logs/reply", model.LogChunk{ID: "x"}, except("agent:n1"), false},
	}
	for _, id := range []string{tn.aJob, tn.aPending} {
		ps = append(ps, probe{"GET", "/v1/jobs/" + id, nil, notA, true}, probe{"DELETE", "/v1/jobs/" + id, nil, notA, true},
			probe{"GET", "/v1/jobs/" + id + "/logs?tail=5", nil, notA, true})
	}
	ps = append(ps, probe{"GET", "/v1/jobs/" + tn.bJob, nil, notB, true}, probe{"DELETE", "/v1/jobs/" + tn.bJob, nil, notB, true},
		probe{"GET", "/v1/jobs/" + tn.bJob + "/logs", nil, notB, true})
	for _, n := range []string{"n1", "n2", "n-none"} {
		for _, act := range []string{"drain", "undrain", "quarantine", "unquarantine"} {
			ps = append(ps, probe{"POST", "/v1/nodes/" + n + "/" + act, nil, all, false})
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
			e := c.apiError(data)
			switch {
			case p.hide && strings.HasPrefix(role, "team:"):
				if status != 404 || e.Code != "not_found" {
					t.Errorf("%s %s as %s: %d %+v, want 404 not_found (another team's object is not confirmed)", p.method, p.path, role, status, e)
				}
			case status == 404 && e.Code == "not_found" && p.hide:
			case status != 403 || e.Code != "forbidden" || e.Scope == "":
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
		{"team:acme/a", []string{}, []string{}, []string{}},
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

// TestAutoscalerTokenBoundToTheDeployment: team a's autoscaler token was
// made for a's chat; a deletes it and team b creates a deployment of the
// same name. The token reaches nothing of b's (it used to read b's
// deployment, env and all, and scale it).
func TestAutoscalerTokenBoundToTheDeployment(t *testing.T) {
	c := newCluster(t)
	a, b := c.token("team:a"), c.token("team:b")
	dep := func(secret string) api.DeploymentRequest {
		return api.DeploymentRequest{Name: "chat", Image: "srv", ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"},
			MaxReplicas: 2, Env: map[string]string{"SECRET": secret}}
	}
	c.mustJSON(a, "POST", "/v1/deployments", dep("a-secret"), 201, nil)
	scaler := c.token("autoscaler:chat")
	c.mustJSON(scaler, "PATCH", "/v1/deployments/chat", api.ScaleRequest{Desired: intp(1)}, 200, nil)
	c.mustJSON(a, "DELETE", "/v1/deployments/chat", nil, 204, nil)
	c.mustJSON(b, "POST", "/v1/deployments", dep("b-secret"), 201, nil)
	for _, p := range []struct {
		method string
		body   any
	}{{"GET", nil}, {"PATCH", api.ScaleRequest{Desired: intp(2)}}} {
		status, data := c.raw(scaler, p.method, "/v1/deployments/chat", p.body)
		if status != 404 || strings.Contains(string(data), "b-secret") {
			t.Errorf("%s with the old deployment's autoscaler token: %d %.300s, want 404", p.method, status, data)
		}
	}
	var l api.DeploymentList
	c.mustJSON(scaler, "GET", "/v1/deployments", nil, 200, &l)
	if len(l.Deployments) != 0 {
		t.Errorf("the old autoscaler token lists %d deployments", len(l.Deployments))
	}
	var d api.Deployment
	c.mustJSON(b, "GET", "/v1/deployments/chat", nil, 200, &d)
	if d.Desired != 0 {
		t.Errorf("b's deployment desired %d: scaled by a's token", d.Desired)
	}
	// A token for a deployment that does not exist is refused.
	status, data := c.raw(c.admin, "POST", "/v1/tokens", api.TokenRequest{Role: "autoscaler:nothing"})
	if e := c.apiError(data); status != 400 || e.Field != "role" {
		t.Errorf("autoscaler token for no deployment: %d %+v", status, e)
	}
}

// TestTokenLifecycle: tokens are listed (never with secrets), revoked by
// id (refused at once), expire at their ttl, and the last admin token
// cannot be revoked.
func TestTokenLifecycle(t *testing.T) {
	c := newCluster(t)
	var made api.Token
	c.mustJSON(c.admin, "POST", "/v1/tokens", api.TokenRequest{Role: "team:a", Name: "ci"}, 201, &made)
	c.mustJSON(made.Secret, "GET", "/v1/jobs", nil, 200, nil)
	var l api.TokenList
	c.mustJSON(c.admin, "GET", "/v1/tokens", nil, 200, &l)
	found := false
	for _, tk := range l.Tokens {
		if tk.Secret != "" {
			t.Errorf("GET /v1/tokens shows the secret of %s", tk.ID)
		}
		found = found || tk.ID == made.ID && tk.Role == "team:a" && tk.Name == "ci"
	}
	if !found {
		t.Fatalf("token %s not listed: %+v", made.ID, l.Tokens)
	}
	c.mustJSON(c.admin, "DELETE", "/v1/tokens/"+made.ID, nil, 200, nil)
	if status, data := c.raw(made.Secret, "GET", "/v1/jobs", nil); status != 401 {
		t.Errorf("revoked token: %d %.200s, want 401", status, data)
	}
	if status, _ := c.raw(c.admin, "DELETE", "/v1/tokens/"+made.ID, nil); status != 404 {
		t.Errorf("revoking it again: %d, want 404", status)
	}
	// Expiry.
	var short api.Token
	c.mustJSON(c.admin, "POST", "/v1/tokens", api.TokenRequest{Role: "team:a", TTL: "1s"}, 201, &short)
	if short.ExpiresAt == nil {
		t.Fatalf("a token with a ttl has no expires_at")
	}
	c.mustJSON(short.Secret, "GET", "/v1/jobs", nil, 200, nil)
	time.Sleep(time.Until(*short.ExpiresAt) + 50*time.Millisecond)
	status, data := c.raw(short.Secret, "GET", "/v1/jobs", nil)
	if e := c.apiError(data); status != 401 || !strings.Contains(e.Message, "expired") {
		t.Errorf("expired token: %d %+v, want 401 saying it expired", status, e)
	}
	for _, ttl := range []string{"-1h", "0s", "forever", "100000h"} {
		if status, _ := c.raw(c.admin, "POST", "/v1/tokens", api.TokenRequest{Role: "team:a", TTL: ttl}); status != 400 {
			t.Errorf("ttl %q: %d, want 400", ttl, status)
		}
	}
	// The last admin token.
	c.mustJSON(c.admin, "GET", "/v1/tokens", nil, 200, &l)
	var admins []string
	for _, tk := range l.Tokens {
		if tk.Role == "admin" {
			admins = append(admins, tk.ID)
		}
	}
	if len(admins) != 1 {
		t.Fatalf("admin tokens %v", admins)
	}
	if status, _ := c.raw(c.admin, "DELETE", "/v1/tokens/"+admins[0], nil); status != 409 {
		t.Errorf("revoking the last admin token: %d, want 409", status)
	}
	c.mustJSON(c.admin, "GET", "/v1/jobs", nil, 200, nil)
}
