package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// ErrNotFound means the object does not exist.
var ErrNotFound = errors.New("not found")

// ConflictError means the request contradicts the object's state (cancel
// of a finished job); nothing was written.
type ConflictError struct{ Message string }

func (e *ConflictError) Error() string { return e.Message }

// write runs fn on a fresh change and commits it, retrying when the table
// moved under it. fn may return an error to write nothing.
func (c *Controller) write(ctx context.Context, fn func(ch *change) error) error {
	w, err := c.Writer()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		ch := c.newChange(w, c.cfg.Clock())
		if err := fn(ch); err != nil {
			return err
		}
		if ch.empty() {
			return nil
		}
		_, err := w.Commit(ctx, ch.txn)
		if err == nil || !errors.Is(err, store.ErrConflict) || attempt == 8 {
			return err
		}
	}
}

type idempotent struct {
	JobID string `json:"job_id"`
	// Body fingerprints the request the key was first used with: the
	// same key with another request is a client bug, refused, not a
	// retry answered with the first job (which dropped the second
	// request silently).
	Body string `json:"body,omitempty"`
}

// IdempotencyError: an Idempotency-Key reused with a different request.
type IdempotencyError struct{ JobID string }

func (e *IdempotencyError) Error() string {
	return fmt.Sprintf("Idempotency-Key: already used for a different request (job %s); use a new key for a new job, or resend the same request to get that job", e.JobID)
}

// fingerprint is what identifies a submitted request: the job as
// admitted, without what the server assigns (id, times, owner, history).
func fingerprint(j model.Job) string {
	j.ID, j.SubmittedAt, j.QueuedAt, j.Owner, j.History = "", time.Time{}, time.Time{}, "", nil
	b, _ := json.Marshal(j)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}

// idemKey scopes an Idempotency-Key to its principal: two tenants using
// the same key never see each other's jobs.
func idemKey(principal, key string) string {
	h := sha256.Sum256([]byte(principal + "\x00" + key))
	return hex.EncodeToString(h[:16])
}

// SubmitJob admits and queues a job. With an idempotency key, a retry
// returns the job the first attempt created (created false).
func (c *Controller) SubmitJob(ctx context.Context, j model.Job, principal, key string) (model.Job, bool, error) {
	if err := c.Admit(j); err != nil {
		return model.Job{}, false, err
	}
	body := fingerprint(j)
	if key != "" {
		if rec, ok := c.idempotentJob(principal, key); ok {
			if rec.Body != "" && rec.Body != body {
				return model.Job{}, false, &IdempotencyError{JobID: rec.JobID}
			}
			job, found := store.Get[model.Job](c.st.Cache(), store.Jobs, rec.JobID)
			if found {
				return job, false, nil
			}
		}
	}
	now := c.cfg.Clock()
	j.State, j.SubmittedAt, j.QueuedAt, j.Owner = model.JobPending, now, time.Time{}, principal
	j.Record(now, "submitted", "")
	err := c.write(ctx, func(ch *change) error {
		ch.txn.Create(store.Jobs, j.ID, j)
		if key != "" {
			ch.txn.Create(store.Idempotency, idemKey(principal, key), idempotent{JobID: j.ID, Body: body})
		}
		ch.writes++
		return nil
	})
	if errors.Is(err, store.ErrConflict) && key != "" {
		if rec, ok := c.idempotentJob(principal, key); ok {
			if rec.Body != "" && rec.Body != body {
				return model.Job{}, false, &IdempotencyError{JobID: rec.JobID}
			}
			if job, found := store.Get[model.Job](c.st.Cache(), store.Jobs, rec.JobID); found {
				return job, false, nil
			}
		}
	}
	if errors.Is(err, store.ErrConflict) {
		return model.Job{}, false, &ConflictError{Message: fmt.Sprintf("job %s already exists", j.ID)}
	}
	if err != nil {
		return model.Job{}, false, err
	}
	c.nudge()
	return j, true, nil
}

func (c *Controller) idempotentJob(principal, key string) (idempotent, bool) {
	var rec idempotent
	ok := false
	c.st.Cache().Read(func(v store.View) {
		if e, found := v.Get(store.Idempotency, idemKey(principal, key)); found {
			ok = json.Unmarshal(e.Raw(), &rec) == nil
		}
	})
	return rec, ok
}

// CancelJob ends a job: pending jobs leave the queue, running ones are
// asked to stop (SIGTERM, then SIGKILL at the deadline).
func (c *Controller) CancelJob(ctx context.Context, id, by string) (model.Job, error) {
	var out model.Job
	err := c.write(ctx, func(ch *change) error {
		j := ch.job(id)
		if j == nil {
			return ErrNotFound
		}
		if j.State.Terminal() {
			return &ConflictError{Message: fmt.Sprintf("job %s is already %s", id, j.State)}
		}
		if j.State == model.JobPending {
			j.EditRun().WaitSeconds += max(0, ch.now.Sub(j.Queued()).Seconds())
		}
		j.State, j.FinishedAt = model.JobCancelled, ch.now
		j.Record(ch.now, "cancelled", "by "+by)
		allocs := ch.allocsOf(id)
		for _, a := range allocs {
			ch.stop(a, "cancelled", ch.stopDeadline(a))
		}
		if len(allocs) == 0 {
			ch.recordJob(j) // nothing runs: it ends here
		}
		out = *j
		return nil
	})
	if err == nil {
		c.Kick()
	}
	return out, err
}

// CreateDeployment stores a new deployment.
func (c *Controller) CreateDeployment(ctx context.Context, d model.Deployment) (model.Deployment, error) {
	if err := c.AdmitDeployment(d); err != nil {
		return model.Deployment{}, err
	}
	d.CreatedAt = c.cfg.Clock()
	err := c.write(ctx, func(ch *change) error {
		ch.txn.Create(store.Deployments, d.ID, d)
		ch.writes++
		return nil
	})
	if errors.Is(err, store.ErrConflict) {
		return model.Deployment{}, &ConflictError{Message: fmt.Sprintf("deployment %s already exists", d.ID)}
	}
	c.Kick()
	return d, err
}

// ScaleDeployment sets desired_replicas, the autoscaler's only verb.
func (c *Controller) ScaleDeployment(ctx context.Context, id string, desired int) (model.Deployment, error) {
	var out model.Deployment
	err := c.write(ctx, func(ch *change) error {
		d := ch.deployment(id)
		if d == nil {
			return ErrNotFound
		}
		d.Desired = desired
		out = *d
		return nil
	})
	if err == nil {
		c.Kick()
	}
	return out, err
}

// DeleteDeployment removes a deployment; its replicas stop.
func (c *Controller) DeleteDeployment(ctx context.Context, id string) error {
	return c.write(ctx, func(ch *change) error {
		if ch.deployment(id) == nil {
			return ErrNotFound
		}
		delete(ch.deps, id)
		ch.txn.Delete(store.Deployments, id)
		for _, a := range ch.allocsOf(id) {
			ch.stop(a, "deleted", ch.now.Add(c.cfg.StopGrace))
		}
		return nil
	})
}

// NodeAction is an operator's verb on a node.
type NodeAction string

const (
	Drain        NodeAction = "drain"
	Undrain      NodeAction = "undrain"
	Quarantine   NodeAction = "quarantine"
	Unquarantine NodeAction = "unquarantine"
)

// SetNode applies an operator action. Drain stops new placements and lets
// work finish; quarantine also moves the work off (§8).
func (c *Controller) SetNode(ctx context.Context, id string, act NodeAction) (model.Node, error) {
	var out model.Node
	err := c.write(ctx, func(ch *change) error {
		n := ch.node(id)
		if n == nil {
			return ErrNotFound
		}
		switch act {
		case Drain:
			n.Draining = true
		case Undrain:
			n.Draining = false
		case Quarantine:
			n.Quarantined = true
			for _, a := range ch.allocsOn(id) {
				ch.stop(a, "quarantined", ch.stopDeadline(a))
			}
		case Unquarantine:
			n.Quarantined, n.QuarantinedGPUs = false, 0
			if n.Health == model.HealthUnhealthy {
				n.Health = model.HealthHealthy
			}
		default:
			return fmt.Errorf("action: %q is not drain, undrain, quarantine or unquarantine", act)
		}
		out = *n
		return nil
	})
	if err == nil {
		c.Kick()
	}
	return out, err
}

// PutQuota creates or replaces one scope's quota.
func (c *Controller) PutQuota(ctx context.Context, q model.Quota) error {
	if err := q.Validate(); err != nil {
		return err
	}
	err := c.write(ctx, func(ch *change) error {
		ch.txn.Put(store.Quotas, q.Scope, q)
		ch.writes++
		return nil
	})
	if err == nil {
		c.Kick()
	}
	return err
}

// DeleteQuota removes one scope's quota.
func (c *Controller) DeleteQuota(ctx context.Context, scope string) error {
	if _, ok := store.Get[model.Quota](c.st.Cache(), store.Quotas, scope); !ok {
		return ErrNotFound
	}
	return c.write(ctx, func(ch *change) error {
		ch.txn.Delete(store.Quotas, scope)
		return nil
	})
}
