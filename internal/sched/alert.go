package sched

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Severity says who must look: info is for the timeline, warn for the
// dashboard, page for a human now.
type Severity string

const (
	SeverityInfo Severity = "info"
	SeverityWarn Severity = "warn"
	SeverityPage Severity = "page"
)

// Alert is something a person should know, raised by a pass. IDs are
// stable across passes so that the control loop can de-duplicate.
type Alert struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Kind     string   `json:"kind"`
	Subject  string   `json:"subject,omitempty"`
	Message  string   `json:"message"`
	Page     *Page    `json:"page,omitempty"`
}

// Page is R6's page: it says what to do, priced in the units each side
// cares about, not merely what happened.
type Page struct {
	Deployment  string `json:"deployment"`
	Want        int    `json:"want_replicas"`
	Have        int    `json:"have_replicas"`
	Min         int    `json:"min_replicas"`
	BlockedGPUs int    `json:"blocked_gpus"`
	// Rate is preemption's share of running training GPUs over the last
	// hour; RateAfter what the listed preemptions would make it.
	Rate      float64 `json:"rate"`
	RateAfter float64 `json:"rate_after"`
	Limit     float64 `json:"limit"`
	// Restores is how many missing replicas the listed preemptions place.
	Restores     int          `json:"restores"`
	WouldPreempt []PageVictim `json:"would_preempt"`
	Actions      []PageAction `json:"actions"`
}

// PageVictim is one job the blocked scale-up would preempt.
type PageVictim struct {
	Job             string        `json:"job"`
	Team            string        `json:"team"`
	GPUs            int           `json:"gpus"`
	Runtime         time.Duration `json:"runtime"`
	SinceCheckpoint time.Duration `json:"since_checkpoint"`
	CostGPUHours    float64       `json:"cost_gpu_hours"`
	// ResizeTo, when set, is a shrink of an elastic job to that size
	// rather than a preemption: only Allocations stop.
	ResizeTo    int      `json:"resize_to,omitempty"`
	Allocations []string `json:"allocations,omitempty"`
}

// PageAction is one button on the page.
type PageAction struct {
	ID    string `json:"id"` // raise_budget, preempt, accept_degraded
	Label string `json:"label"`
	// Budget is the new page limit raise_budget sets.
	Budget       float64 `json:"budget,omitempty"`
	CostGPUHours float64 `json:"cost_gpu_hours"`
	Replicas     int     `json:"replicas"`
}

func (p *planner) alert(a Alert) { p.d.Alerts = append(p.d.Alerts, a) }

// throttle collects one deployment's scale-up held back by the budget.
type throttle struct {
	want, have, min, missing, gpus int
	victims                        []*victim
	// restores is how many of the missing replicas preempting the
	// victims would place; victimGPUs what they hold.
	restores, victimGPUs int
}

// budgetLine is the one sentence the pending reason, the page's message
// and the CLI print for a scale-up the budget holds back, so that they
// cannot disagree: the rate now, the rate the listed preemptions would
// make, and the limit, each as a share of running training GPUs per hour.
func (p *planner) budgetLine(id string, t *throttle) string {
	return BudgetLine(&Page{Deployment: id, BlockedGPUs: t.missing * t.gpus, Rate: p.budget.rate(0),
		RateAfter: p.budget.rate(t.victimGPUs), Limit: p.cfg.Budget.Page, WouldPreempt: make([]PageVictim, len(t.victims))})
}

// BudgetLine is that sentence from a page's own fields: the server gives
// a throttled deployment's pending reason from the page it shows (which
// is refreshed less often than passes run), so the two always agree.
func BudgetLine(pg *Page) string {
	return fmt.Sprintf("the preemption budget holds back %d GPUs: preemption took %.0f%%/h of running training GPUs in the last hour, "+
		"and the %s that would make room would take it to %.0f%%/h, over the %.0f%%/h limit (page budget/%s)",
		pg.BlockedGPUs, 100*pg.Rate, plural(len(pg.WouldPreempt), "job"), 100*pg.RateAfter, 100*pg.Limit, pg.Deployment)
}

// floorState says where a deployment stands against its min_replicas.
func floorState(have, min int) string {
	switch {
	case have < min:
		return fmt.Sprintf("%d below min_replicas %d", min-have, min)
	case have == min:
		return fmt.Sprintf("at min_replicas %d", min)
	}
	return fmt.Sprintf("above min_replicas %d", min)
}

// plural is "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// pageThrottled raises R6's page for every deployment whose scale-up above
// min_replicas waits on the preemption budget.
func (p *planner) pageThrottled() {
	ids := make([]string, 0, len(p.throttled))
	for id := range p.throttled {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := p.throttled[id]
		if acc := p.accepted(id); acc != nil && t.want <= acc.Want {
			// An operator chose to run below target: not a page again
			// for the same shortfall, but still on the dashboard.
			p.alert(Alert{ID: "budget/" + id, Severity: SeverityWarn, Kind: "inference_degraded_accepted", Subject: id,
				Message: fmt.Sprintf("%s runs %d of %d wanted replicas (min_replicas %d): accepted degraded by %s at %s; a target above %d pages again",
					id, t.have, t.want, t.min, acc.By, acc.At.UTC().Format(time.RFC3339), acc.Want)})
			continue
		}
		cost := 0.0
		pg := &Page{Deployment: id, Want: t.want, Have: t.have, Min: t.min, BlockedGPUs: t.missing * t.gpus,
			Rate: p.budget.rate(0), RateAfter: p.budget.rate(t.victimGPUs), Limit: p.cfg.Budget.Page, Restores: t.restores}
		for _, v := range t.victims {
			last := v.job.Run().LastCheckpointAt
			since := p.now.Sub(last)
			if last.IsZero() {
				since = p.now.Sub(v.job.StartedAt)
			}
			c := p.lost(v)
			pv := PageVictim{Job: v.job.ID, Team: v.job.Team, GPUs: v.gpus,
				Runtime: p.now.Sub(v.job.StartedAt).Round(time.Minute), SinceCheckpoint: since.Round(time.Minute), CostGPUHours: c}
			if v.tier == tierShrink {
				pv.ResizeTo = v.shrinkTo
				for _, a := range v.allocs {
					pv.Allocations = append(pv.Allocations, a.ID)
				}
			}
			pg.WouldPreempt = append(pg.WouldPreempt, pv)
			cost += c
		}
		cost = math.Round(cost*10) / 10
		needed := math.Ceil(pg.RateAfter*20) / 20 // the next 5% that lets them through
		restores := fmt.Sprintf("restores %d of the %d missing replicas", t.restores, t.missing)
		pg.Actions = []PageAction{
			{ID: "raise_budget", Label: fmt.Sprintf("raise the budget to %.0f%%/h: %s", 100*needed, restores), Budget: needed, CostGPUHours: cost, Replicas: t.restores},
			{ID: "preempt", Label: "preempt the listed jobs once: " + restores, CostGPUHours: cost, Replicas: t.restores},
			{ID: "accept_degraded", Label: fmt.Sprintf("accept %d of %d replicas until the target rises", t.have, t.want), Replicas: 0},
		}
		var lines []string
		for _, v := range pg.WouldPreempt {
			what := v.Job
			if v.ResizeTo > 0 {
				what = fmt.Sprintf("shrink %s to %d", v.Job, v.ResizeTo)
			}
			lines = append(lines, fmt.Sprintf("%s (%s, %d GPUs, running %s, last checkpoint %s ago, %.1f GPU-h)", what, v.Team, v.GPUs,
				shortDuration(v.Runtime), shortDuration(v.SinceCheckpoint), v.CostGPUHours))
		}
		msg := fmt.Sprintf("%s wants %d replicas and has %d (%s); %s. Preempting %s (~%.1f GPU-hours of training progress lost) %s",
			id, t.want, t.have, floorState(t.have, t.min), BudgetLine(pg), strings.Join(lines, "; "), cost, restores)
		p.alert(Alert{ID: "budget/" + id, Severity: SeverityPage, Kind: "inference_throttled", Subject: id, Message: msg, Page: pg})
	}
}

// accepted is the deployment's standing accept_degraded decision, if any.
func (p *planner) accepted(id string) *model.AcceptedDegraded {
	for i := range p.s.Deployments {
		if p.s.Deployments[i].ID == id {
			return p.s.Deployments[i].Accepted
		}
	}
	return nil
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%.0fh", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.0fm", d.Minutes())
	}
	return fmt.Sprintf("%.0fs", d.Seconds())
}
