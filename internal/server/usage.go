package server

import (
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// usage answers GET /v1/usage?since=7d&by=team|org|user|kind. Teams see
// their own team's work only; admins see all.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if p.Kind != RoleAdmin && p.Kind != RoleTeam {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	now := time.Now()
	q := r.URL.Query()
	since := now.Add(-7 * 24 * time.Hour)
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v, now)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		since = t
	}
	by := q.Get("by")
	if by == "" {
		by = "team"
	}
	if !slices.Contains(api.UsageGroups, by) {
		s.fail(w, r, api.Invalid("by", "one of %s, not %s", strings.Join(api.UsageGroups, ", "), api.Quote(by)))
		return
	}
	visible := func(org, team string) bool { return mayRead(p, org, team) }
	recs := s.ctl.UsageRecords(since)
	var running []usageLive
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Allocations, func(_ string, e store.Entry) {
			a := e.Obj.(model.Allocation)
			l := usageLive{alloc: a}
			if a.OwnerKind == model.OwnerInference {
				if d, ok := v.Get(store.Deployments, a.OwnerID); ok {
					l.org, l.team = model.TeamOf(d.Obj.(model.Deployment).Team)
				}
			} else if j, ok := v.Get(store.Jobs, a.OwnerID); ok {
				jb := j.Obj.(*model.Job)
				l.org, l.team, l.user = jb.Org, jb.Team, jb.User
			}
			running = append(running, l)
		})
	})
	writeJSON(w, 200, summarizeUsage(recs, running, since, now, by, visible))
}

// usageLive is a running allocation with its owner's place.
type usageLive struct {
	alloc           model.Allocation
	org, team, user string
}

func parseSince(v string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		// time.ParseDuration has no days; a day here is 24 h.
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 && n <= 3660 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	} else if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	} else if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Time{}, api.Invalid("since", "a duration (7d, 12h, 30m) or an RFC 3339 time, not %s", api.Quote(v))
}

func usageKey(by string, kind model.OwnerKind, org, team, user string) string {
	if kind == model.OwnerBackfill {
		kind = model.OwnerTraining
	}
	or := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	switch by {
	case "org":
		return or(org)
	case "user":
		return or(org) + "/" + or(team) + "/" + or(user)
	case "kind":
		return string(kind)
	}
	return or(org) + "/" + or(team)
}

// summarizeUsage groups records and running allocations by key.
func summarizeUsage(recs []model.UsageRecord, running []usageLive, since, now time.Time, by string, visible func(org, team string) bool) api.Usage {
	rows := map[string]*api.UsageRow{}
	waits := map[string][]float64{}
	row := func(k string) *api.UsageRow {
		if rows[k] == nil {
			rows[k] = &api.UsageRow{Key: k}
		}
		return rows[k]
	}
	for _, r := range recs {
		if !visible(r.Org, r.Team) {
			continue
		}
		k := usageKey(by, r.Kind, r.Org, r.Team, r.User)
		x := row(k)
		switch r.Kind {
		case model.OwnerInference:
			x.Replicas++
			x.GPUHours += r.GPUSeconds * overlap(r.Start, r.End, since, now) / 3600
		default:
			x.Jobs++
			x.GPUHours += r.GPUSeconds / 3600
			x.Preemptions += r.Preemptions
			waits[k] = append(waits[k], r.WaitSeconds/3600)
		}
	}
	for _, l := range running {
		if !visible(l.org, l.team) {
			continue
		}
		start := l.alloc.CreatedAt
		if start.Before(since) {
			start = since
		}
		row(usageKey(by, l.alloc.OwnerKind, l.org, l.team, l.user)).RunningGPUHours += model.AllocGPUs(&l.alloc) * max(0, now.Sub(start).Hours())
	}
	out := api.Usage{Since: since, Until: now, By: by, Rows: []api.UsageRow{}}
	for k, x := range rows {
		x.QueueP50Hours, x.QueueP90Hours = quantile(waits[k], 0.5), quantile(waits[k], 0.9)
		out.Rows = append(out.Rows, *x)
	}
	sort.Slice(out.Rows, func(i, j int) bool {
		a, b := out.Rows[i], out.Rows[j]
		if a.GPUHours+a.RunningGPUHours != b.GPUHours+b.RunningGPUHours {
			return a.GPUHours+a.RunningGPUHours > b.GPUHours+b.RunningGPUHours
		}
		return a.Key < b.Key
	})
	return out
}

// overlap is the share of [start, end] inside [from, to].
func overlap(start, end, from, to time.Time) float64 {
	if !end.After(start) {
		return 1
	}
	lo, hi := start, end
	if from.After(lo) {
		lo = from
	}
	if to.Before(hi) {
		hi = to
	}
	if !hi.After(lo) {
		return 0
	}
	return hi.Sub(lo).Seconds() / end.Sub(start).Seconds()
}

// quantile is the nearest-rank quantile; 0 for none.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

// history answers GET /v1/history?since=6h: the fleet samples the
// dashboard plots, oldest first.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	if !mayReadFleet(p) {
		s.fail(w, r, forbidden(p, "role admin or team:<name>"))
		return
	}
	now := time.Now()
	since := now.Add(-6 * time.Hour)
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := parseSince(v, now)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		since = t
	}
	writeJSON(w, 200, map[string]any{"since": since, "every": s.ctl.Config().HistoryEvery.String(), "samples": s.ctl.History(since)})
}
