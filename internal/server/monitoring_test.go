package server

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"gopkg.in/yaml.v3"
)

// TestShippedMonitoringNamesServedMetrics: every metric the shipped
// Prometheus rules and Grafana dashboard query (deploy/) is one /metrics
// serves, with the labels the queries select and group by.
func TestShippedMonitoringNamesServedMetrics(t *testing.T) {
	c := newCluster(t)
	// A pass, HTTP requests, heartbeats: every histogram has data.
	c.waitRunning(c.submit(c.admin, api.JobRequest{Name: "probe", GPUs: 1, Topology: "node"}).JobID)
	status, data := c.raw("", "GET", "/metrics", nil)
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	served := map[string]map[string]bool{} // series name → label names
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	series := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? `)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for sc.Scan() {
		m := series.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if served[m[1]] == nil {
			served[m[1]] = map[string]bool{"instance": true, "job": true} // added by the scrape
		}
		for _, l := range label.FindAllStringSubmatch(m[3], -1) {
			served[m[1]][l[1]] = true
		}
	}

	var exprs []string
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	b, err := os.ReadFile("../../deploy/prometheus/berth-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil || len(rules.Groups) == 0 {
		t.Fatalf("berth-alerts.yaml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, expr, a severity label and a summary", r)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err = os.ReadFile("../../deploy/grafana/berth-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil || len(dash.Panels) == 0 {
		t.Fatalf("berth-dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}

	name := regexp.MustCompile(`\b(berth_[a-z_]+)(\{([^}]*)\})?`)
	by := regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	used := 0
	for _, e := range exprs {
		names := name.FindAllStringSubmatch(e, -1)
		for _, m := range names {
			used++
			labels, ok := served[m[1]]
			if !ok {
				t.Errorf("%q queries %s, which /metrics does not serve", e, m[1])
				continue
			}
			for _, l := range label.FindAllStringSubmatch(m[3], -1) {
				if !labels[l[1]] {
					t.Errorf("%q selects label %s of %s, which has none", e, l[1], m[1])
				}
			}
		}
		// Grouping labels must exist on some series the expression reads.
		for _, g := range by.FindAllStringSubmatch(e, -1) {
			for _, l := range strings.Split(g[1], ",") {
				l = strings.TrimSpace(l)
				if l == "" {
					continue
				}
				found := false
				for _, m := range names {
					found = found || served[m[1]][l]
				}
				if !found {
					t.Errorf("%q groups by %s, which none of its series has", e, l)
				}
			}
		}
	}
	if used < 20 {
		t.Errorf("only %d metric references checked", used)
	}
}
