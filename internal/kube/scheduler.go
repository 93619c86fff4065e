package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// Config configures the Kubernetes mode.
type Config struct {
	// SchedulerName picks the pods berth schedules; default "berth".
	SchedulerName string
	// PodLabel is the node label naming a node's leaf switch (berth's
	// pod); default DefaultPodLabel.
	PodLabel string
	// Namespace holds berth's own objects: its Lease and state ConfigMap.
	Namespace string
	// StateName names the state ConfigMap and the Lease; default "berth-scheduler".
	StateName string
	Sched     sched.Config
	// Quotas is the quota tree over orgs and namespaces (quota.go),
	// checked by CheckQuotas.
	Quotas []model.Quota
	Clock  func() time.Time
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.SchedulerName == "" {
		c.SchedulerName = "berth"
	}
	if c.PodLabel == "" {
		c.PodLabel = DefaultPodLabel
	}
	if c.Namespace == "" {
		c.Namespace = "berth-system"
	}
	if c.StateName == "" {
		c.StateName = "berth-scheduler"
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// A relocation starts a second copy of a replica; in Kubernetes a
	// replica's pods belong to its ReplicaSet, which berth does not
	// create pods for. Defragmentation therefore stays off here.
	c.Sched.MaxRelocations = -1
}

// Scheduler applies sched.Plan's decisions to a Kubernetes cluster under
// one fence.
type Scheduler struct {
	cs     kubernetes.Interface
	cfg    Config
	fencer fencer
	store  stateStore
	src    source
	// kick, when watching, is signalled when the cluster changed.
	kick    <-chan struct{}
	assumed map[string]assumed
	last    atomic.Pointer[sched.Decision]
	total   atomic.Int64 // GPUs the last pass read
}

// New returns a scheduler writing under fence (a leader's Lease
// transition count; see the package doc).
func New(cs kubernetes.Interface, cfg Config, fence int64) *Scheduler {
	cfg.defaults()
	return &Scheduler{cs: cs, cfg: cfg, fencer: fencer{cs: cs, fence: fence},
		store: stateStore{cs: cs, namespace: cfg.Namespace, name: cfg.StateName},
		src:   listSource{cs}, assumed: map[string]assumed{}}
}

// Watch makes the scheduler read Nodes and Pods from informers (a watch
// kept open until ctx ends) instead of listing them every pass, once
// their first list is in. Changed is then signalled on every change.
func (s *Scheduler) Watch(ctx context.Context) error {
	w := newWatchSource(s.cs)
	if err := w.start(ctx); err != nil {
		return err
	}
	s.src, s.kick = w, w.kick
	return nil
}

// Changed is signalled when the cluster changed since the last signal;
// nil unless watching.
func (s *Scheduler) Changed() <-chan struct{} { return s.kick }

// Last is the last pass's decision, nil before the first.
func (s *Scheduler) Last() *sched.Decision { return s.last.Load() }

// TotalGPUs is the GPUs of the nodes the last pass read.
func (s *Scheduler) TotalGPUs() int { return int(s.total.Load()) }

// Takeover fences every unbound pod berth schedules, so that no older
// leader's bind of them can succeed from here on, and fences the state
// ConfigMap. A new leader calls it before its first pass.
func (s *Scheduler) Takeover(ctx context.Context) error {
	kept, err := s.store.load(ctx)
	if err != nil {
		return err
	}
	if kept.Fence > s.fencer.fence {
		return fmt.Errorf("state fence %d > %d: %w", kept.Fence, s.fencer.fence, ErrDeposed)
	}
	kept.Fence = s.fencer.fence
	if err := s.store.save(ctx, kept); err != nil {
		return fmt.Errorf("fencing the state configmap: %w", err)
	}
	pods, err := s.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.SchedulerName != s.cfg.SchedulerName || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		if _, err := s.fencer.claim(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// Pass is one scheduling pass: read the cluster, Plan, apply. The state
// ConfigMap is saved before any bind or eviction, so that a preemption is
// in the budget's history before it happens and a deposed leader stops
// before it writes a pod.
func (s *Scheduler) Pass(ctx context.Context) (*sched.Decision, error) {
	now := s.cfg.Clock()
	kept, err := s.store.load(ctx)
	if err != nil {
		return nil, err
	}
	if kept.Fence > s.fencer.fence {
		return nil, fmt.Errorf("state fence %d > %d: %w", kept.Fence, s.fencer.fence, ErrDeposed)
	}
	nodes, pods, err := s.src.list(ctx)
	if err != nil {
		return nil, err
	}
	orgs, err := s.src.orgs(ctx)
	if err != nil {
		return nil, err
	}
	pods = s.overlay(pods, now)
	kept.trim(now)
	w := read(nodes, pods, orgs, s.cfg.SchedulerName, s.cfg.PodLabel, kept, s.cfg.Sched, s.cfg.Quotas)
	d := sched.Plan(w.state, now)
	s.last.Store(&d)
	total := 0
	for _, n := range w.state.Nodes {
		total += n.GPUs
	}
	s.total.Store(int64(total))

	next := keptState{Fence: s.fencer.fence, Reservations: d.Reservations, Preemptions: kept.Preemptions, Alerts: map[string]sched.Alert{}}
	for _, pr := range d.Preemptions {
		next.Preemptions = append(next.Preemptions, pr.Record(now))
	}
	var raised []sched.Alert
	for _, a := range d.Alerts {
		if _, ok := kept.Alerts[a.ID]; !ok {
			raised = append(raised, a)
		}
		next.Alerts[a.ID] = a
	}
	if err := s.store.save(ctx, next); err != nil {
		return &d, fmt.Errorf("saving berth's state (a newer leader?): %w", err)
	}
	var errs []error
	used := map[string]bool{}
	failed := map[string]string{}
	for i := range d.Binds {
		if err := s.applyBind(ctx, w, &d.Binds[i], used, now); err != nil {
			if errors.Is(err, ErrDeposed) {
				return &d, err
			}
			errs = append(errs, err)
			failed[d.Binds[i].OwnerID] = err.Error()
		}
	}
	for i := range d.Preemptions {
		if err := s.evict(ctx, w, &d.Preemptions[i], now); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.sayPending(ctx, w, &d, used, failed, now)...)
	for _, a := range raised {
		s.page(ctx, a, now)
	}
	return &d, errors.Join(errs...)
}

// sayPending gives every berth pod left unbound its reason; failed are
// the binds this pass could not apply, by owner, with why.
func (s *Scheduler) sayPending(ctx context.Context, w *world, d *sched.Decision, used map[string]bool, failed map[string]string, now time.Time) []error {
	var errs []error
	say := func(p *corev1.Pod, msg string) {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && !used[key(p)] {
			if err := s.pending(ctx, p, msg, now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, k := range sortedKeys(w.invalid) {
		say(w.pods[k], "berth cannot schedule this pod: "+w.invalid[k])
	}
	for _, g := range w.groups {
		if g.missing != "" {
			for _, p := range g.pods {
				say(p, g.missing)
			}
		}
	}
	for _, id := range sortedKeys(failed) {
		if g := w.groups[id]; g != nil {
			for _, p := range g.unbound() {
				say(p, "berth placed this pod but could not bind it: "+failed[id]+"; the next pass tries again")
			}
		}
	}
	for _, pe := range d.Pending {
		g := w.groups[pe.OwnerID]
		if g == nil || pe.Reason == nil {
			continue
		}
		pods := g.unbound()
		if pe.Kind == model.OwnerInference && pe.Missing > 0 {
			var free []*corev1.Pod
			for _, p := range pods {
				if !used[key(p)] {
					free = append(free, p)
				}
			}
			pods = free[:min(pe.Missing, len(free))]
		}
		for _, p := range pods {
			say(p, pe.Reason.Message)
		}
	}
	return errs
}

// page posts a newly raised alert as an Event on berth's state ConfigMap
// (and logs it): R6's pages carry priced options in the message.
func (s *Scheduler) page(ctx context.Context, a sched.Alert, now time.Time) {
	s.cfg.Logger.Warn("berth alert", "id", a.ID, "kind", a.Kind, "severity", a.Severity, "message", a.Message)
	msg := a.Message
	if a.Page != nil {
		for _, o := range a.Page.Actions {
			msg += fmt.Sprintf("; option %s (%s): %.1f GPU-hours, %d replicas", o.ID, o.Label, o.CostGPUHours, o.Replicas)
		}
	}
	typ := corev1.EventTypeNormal
	if a.Page != nil || a.Severity != sched.SeverityInfo {
		typ = corev1.EventTypeWarning
	}
	s.eventOn(ctx, corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: s.cfg.Namespace, Name: s.cfg.StateName},
		typ, "Berth"+a.Kind, msg, now)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
