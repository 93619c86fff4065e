package control

import (
	"errors"
	"testing"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

func TestCancelRunningJob(t *testing.T) {
	h := newHarness(t, Config{})
	a := runOn(h, "n1", map[string]int{"train": 8})["train"]

	j, err := h.ctl.CancelJob(h.ctx, "train", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != model.JobCancelled || !hasEvent(j, "cancelled", "alice") {
		t.Errorf("CancelJob returned %s %+v", j.State, j.History)
	}
	got, ok := h.alloc(a.ID)
	if !ok || !got.Stopping || got.StopReason != "cancelled" || !got.StopDeadline.After(h.clk.Now()) || got.Killing {
		t.Fatalf("allocation after cancel: %+v (present %v); want stopping for cancelled, deadline ahead", got, ok)
	}
	o := h.beat(report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualStopping}))
	if d, _ := desired(o, a.ID); !d.Stop || d.Kill || !d.StopDeadline.Equal(got.StopDeadline) {
		t.Errorf("orders after cancel: %+v", d)
	}

	// SIGTERM makes a nonzero exit: the job is still cancelled, not failed.
	h.beat(report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualExited, ExitCode: 143}))
	h.settle()
	if _, ok := h.alloc(a.ID); ok {
		t.Errorf("allocation %s left after its exit", a.ID)
	}
	if j := h.job("train"); j.State != model.JobCancelled || hasEvent(j, "failed", "") || hasEvent(j, "requeued", "") {
		t.Errorf("job after its cancelled process exited: %s %+v", j.State, j.History)
	}
	if as := h.allocsOf("train"); len(as) != 0 {
		t.Errorf("cancelled job was placed again: %+v", as)
	}

	var conflict *ConflictError
	if _, err := h.ctl.CancelJob(h.ctx, "train", "alice"); !errors.As(err, &conflict) {
		t.Errorf("cancelling a cancelled job: %v, want a ConflictError", err)
	}
	if _, err := h.ctl.CancelJob(h.ctx, "nope", "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("cancelling an unknown job: %v, want ErrNotFound", err)
	}
}

func TestSubmitIdempotency(t *testing.T) {
	h := newHarness(t, Config{})
	first, created, err := h.ctl.SubmitJob(h.ctx, trainingJob("job-1", 8), "alice", "key-1")
	if err != nil || !created || first.ID != "job-1" || first.Owner != "alice" {
		t.Fatalf("first submit: %+v, created %v, %v", first, created, err)
	}
	// A retry carries the same key and request; the server may have
	// minted a new id.
	retry := trainingJob("job-1", 8)
	retry.ID = "job-2"
	again, created, err := h.ctl.SubmitJob(h.ctx, retry, "alice", "key-1")
	if err != nil || created || again.ID != "job-1" {
		t.Errorf("retry: id %q, created %v, %v; want job-1, not created", again.ID, created, err)
	}
	// Another principal's key is its own.
	other, created, err := h.ctl.SubmitJob(h.ctx, trainingJob("job-3", 8), "bob", "key-1")
	if err != nil || !created || other.ID != "job-3" {
		t.Errorf("same key, other principal: id %q, created %v, %v; want a new job", other.ID, created, err)
	}
	for _, id := range []string{"job-1", "job-3"} {
		h.job(id)
	}
	if j, ok := store.Get[model.Job](h.st.Cache(), store.Jobs, "job-2"); ok {
		t.Errorf("the retry created a second job: %+v", j)
	}
	// The same key with a different request is refused, naming the job
	// the key belongs to: not answered with that job as if it were a retry.
	_, created, err = h.ctl.SubmitJob(h.ctx, trainingJob("job-4", 16), "alice", "key-1")
	var ie *IdempotencyError
	if !errors.As(err, &ie) || ie.JobID != "job-1" || created {
		t.Errorf("same key, different request: created %v, %v; want an IdempotencyError naming job-1", created, err)
	}
	if _, ok := store.Get[model.Job](h.st.Cache(), store.Jobs, "job-4"); ok {
		t.Errorf("the mismatched request created a job")
	}
}
