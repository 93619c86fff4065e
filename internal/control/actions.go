package control

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// Alert returns one alert record.
func (c *Controller) Alert(id string) (AlertRecord, bool) {
	var rec AlertRecord
	ok := false
	c.st.Cache().Read(func(v store.View) {
		if e, found := v.Get(store.Alerts, id); found {
			ok = json.Unmarshal(e.Raw(), &rec) == nil
		}
	})
	return rec, ok
}

// Alerts lists every alert record, open and recently resolved.
func (c *Controller) Alerts() []AlertRecord {
	var out []AlertRecord
	c.st.Cache().Read(func(v store.View) {
		v.Each(store.Alerts, func(_ string, e store.Entry) {
			var rec AlertRecord
			if json.Unmarshal(e.Raw(), &rec) == nil {
				out = append(out, rec)
			}
		})
	})
	return out
}

// Act takes one of a page's priced options (R6) and records who chose it:
//   - raise_budget sets the page budget to the option's figure;
//   - preempt stops the jobs the page lists, with their deadlines;
//   - accept_degraded records the decision to run below target.
func (c *Controller) Act(ctx context.Context, id, action, by string) (AlertRecord, error) {
	rec, ok := c.Alert(id)
	if !ok {
		return rec, ErrNotFound
	}
	if rec.Page == nil {
		return rec, &ConflictError{Message: fmt.Sprintf("alert %s is not a page: it has no actions", id)}
	}
	if rec.ResolvedAt != nil {
		return rec, &ConflictError{Message: fmt.Sprintf("alert %s is resolved", id)}
	}
	var opt *struct {
		budget float64
	}
	for _, a := range rec.Page.Actions {
		if a.ID == action {
			opt = &struct{ budget float64 }{a.Budget}
		}
	}
	if opt == nil {
		var ids []string
		for _, a := range rec.Page.Actions {
			ids = append(ids, a.ID)
		}
		return rec, &ConflictError{Message: fmt.Sprintf("action: %q is not offered by alert %s (offered: %v)", action, id, ids)}
	}
	err := c.write(ctx, func(ch *change) error {
		switch action {
		case "raise_budget":
			ch.txn.Put(store.Docs, docConfig, Overrides{PageBudget: opt.budget})
		case "preempt":
			for _, v := range rec.Page.WouldPreempt {
				if v.ResizeTo > 0 {
					ch.shrink(v, by, id)
					continue
				}
				for _, a := range ch.allocsOf(v.Job) {
					if a.OwnerKind != model.OwnerInference {
						ch.stop(a, "preempted", ch.stopDeadline(a))
					}
				}
				if j := ch.job(v.Job); j != nil {
					j.Record(ch.now, "preempted", fmt.Sprintf("by %s from page %s", by, id))
				}
			}
		case "accept_degraded":
			// On the deployment, not only on this alert: the alert is
			// resolved when its condition lapses (a restart, a failover,
			// a quiet minute), the decision must not be.
			if d := ch.deployment(rec.Page.Deployment); d != nil {
				d.Accepted = &model.AcceptedDegraded{Want: rec.Page.Want, Have: rec.Page.Have, By: by, At: ch.now}
			}
		}
		rec.Choice = &Choice{Action: action, By: by, At: ch.now}
		rec.UpdatedAt = ch.now
		ch.txn.Put(store.Alerts, id, rec)
		return nil
	})
	if err == nil {
		c.Kick()
	}
	return rec, err
}

// RecentPreemptions counts preemptions (and their GPUs) in the last hour.
func (c *Controller) RecentPreemptions(now time.Time) (int, int) {
	n, gpus := 0, 0
	for _, r := range c.Preemptions() {
		if now.Sub(r.At) < time.Hour {
			n++
			gpus += r.GPUs
		}
	}
	return n, gpus
}

// shrink does a page's "shrink job X to N": only the growth the page
// listed stops, and only if it is all still there (the job may have
// changed size since the page was raised).
func (ch *change) shrink(v sched.PageVictim, by, page string) {
	j := ch.job(v.Job)
	if j == nil || j.State != model.JobRunning {
		return
	}
	var stop []*model.Allocation
	for _, id := range v.Allocations {
		a := ch.alloc(id)
		if a == nil || a.Stopping {
			return
		}
		stop = append(stop, a)
	}
	for _, a := range stop {
		ch.stop(a, "resized", ch.stopDeadline(a))
	}
	from := j.Size
	j.Resized(ch.now, from, v.ResizeTo, "shrink by "+by+" from page "+page)
	j.Record(ch.now, "shrinking", fmt.Sprintf("%d to %d GPUs by %s from page %s", from, v.ResizeTo, by, page))
}
