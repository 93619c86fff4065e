package kube

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election configures leader election between berth replicas.
type Election struct {
	// Identity names this replica in the Lease (the pod name).
	Identity string
	// LeaseDuration, RenewDeadline, RetryPeriod are client-go's; default
	// 15 s, 10 s, 2 s (kube-scheduler's).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Interval is the longest time between passes (a pass also runs
	// soon after any change to Nodes or Pods); default 1 s.
	Interval time.Duration
	// OnPass, when set, sees every pass's result (tests).
	OnPass func(fence int64, err error)
	// Status, when set, records every pass for /v1/kube/status and
	// /metrics.
	Status *Status
}

// minGap is the least time between passes: a burst of pod events
// (a 256-pod gang created, a node's pods finishing) is one pass, not one
// per event.
const minGap = 50 * time.Millisecond

// Run takes part in leader election until ctx ends; while it leads it
// fences (Takeover), watches Nodes and Pods, and runs a pass whenever
// they change (at most every minGap) and at least every Interval. Its
// fence is the Lease's transition count when it took the lead, plus one.
func Run(ctx context.Context, cs kubernetes.Interface, cfg Config, el Election) error {
	cfg.defaults()
	if el.LeaseDuration == 0 {
		el.LeaseDuration, el.RenewDeadline, el.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if el.Interval == 0 {
		el.Interval = time.Second
	}
	if el.Identity == "" {
		return errors.New("kube: election identity: must not be empty")
	}
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.StateName},
		Client: cs.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: el.Identity}}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: el.LeaseDuration, RenewDeadline: el.RenewDeadline, RetryPeriod: el.RetryPeriod,
		ReleaseOnCancel: true, Name: "berth",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { lead(ctx, cs, cfg, el, lock) },
			OnStoppedLeading: func() { cfg.Logger.Info("berth kube: no longer leading", "identity", el.Identity) },
		},
	})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		le.Run(ctx)
	}
	return nil
}

func lead(ctx context.Context, cs kubernetes.Interface, cfg Config, el Election, lock *resourcelock.LeaseLock) {
	rec, _, err := lock.Get(ctx)
	if err != nil {
		cfg.Logger.Error("berth kube: reading the lease", "err", err)
		return
	}
	fence := int64(rec.LeaderTransitions) + 1
	cfg.Logger.Info("berth kube: leading", "identity", el.Identity, "fence", fence)
	s := New(cs, cfg, fence)
	if err := s.Takeover(ctx); err != nil {
		cfg.Logger.Error("berth kube: takeover", "fence", fence, "err", err)
		if el.OnPass != nil {
			el.OnPass(fence, err)
		}
		return
	}
	if err := s.Watch(ctx); err != nil {
		cfg.Logger.Error("berth kube: watching nodes and pods", "err", err)
		return
	}
	t := time.NewTicker(el.Interval)
	defer t.Stop()
	if el.Status != nil {
		defer el.Status.stepDown()
	}
	for {
		d, err := s.Pass(ctx)
		if el.Status != nil {
			el.Status.observe(fence, d, s.TotalGPUs(), err, cfg.Clock())
		}
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("berth kube: pass", "fence", fence, "err", err)
		}
		if el.OnPass != nil {
			el.OnPass(fence, err)
		}
		if errors.Is(err, ErrDeposed) {
			return
		}
		// The next pass: when the cluster changes (work arrives, GPUs
		// free up), at least minGap after this one, or after Interval
		// with no change (time alone moves reasons, aging and budgets).
		select {
		case <-ctx.Done():
			return
		case <-time.After(minGap):
		}
		select {
		case <-ctx.Done():
			return
		case <-s.Changed():
		case <-t.C:
		}
	}
}
