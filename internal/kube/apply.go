package kube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// podBind is one pod's share of a placement.
type podBind struct {
	pod  *corev1.Pod
	node string
	gpus model.GPUMask
	inst int // the MIG instance of a MIG pod (AnnMIGInstance), 0 for none
}

// split hands a placement's parts to a group's unbound pods, perPod GPUs
// each, in pod-name and part order. A part that does not divide into
// whole pods cannot be applied (a pod sits on one node).
func split(parts []sched.Part, perPod int, pods []*corev1.Pod) ([]podBind, error) {
	var out []podBind
	for _, pt := range parts {
		idx := pt.GPUs.Indices()
		if len(idx)%perPod != 0 {
			return nil, fmt.Errorf("placement puts %d GPUs on node %s, not a multiple of the %d each pod asks for", len(idx), pt.Node, perPod)
		}
		for i := 0; i < len(idx); i += perPod {
			var m model.GPUMask
			for _, g := range idx[i : i+perPod] {
				m |= model.GPUMask(1) << g
			}
			out = append(out, podBind{node: pt.Node, gpus: m, inst: pt.MIGInstance})
		}
	}
	if len(out) != len(pods) {
		return nil, fmt.Errorf("placement holds %d pods' GPUs, the group has %d unbound pods", len(out), len(pods))
	}
	for i := range out {
		out[i].pod = pods[i]
	}
	return out, nil
}

// applyBind binds one decision's pods: a job's all or none (every pod is
// claimed under the fence before the first is bound), or one replica.
func (s *Scheduler) applyBind(ctx context.Context, w *world, b *sched.Bind, used map[string]bool, now time.Time) error {
	g := w.groups[b.OwnerID]
	if g == nil || b.Grow {
		return fmt.Errorf("bind for %s: no such group of pods", b.OwnerID)
	}
	pods := g.unbound()
	ann := map[string]string{}
	if b.Kind == model.OwnerInference {
		var free []*corev1.Pod
		for _, p := range pods {
			if !used[key(p)] {
				free = append(free, p)
			}
		}
		if len(free) == 0 {
			return fmt.Errorf("bind for %s#%d: no unbound replica pod left", b.OwnerID, b.Replica)
		}
		pods = free[:1]
		ann[AnnReplica] = fmt.Sprint(b.Replica)
	}
	if b.Kind == model.OwnerBackfill {
		ann[AnnBackfill] = b.Reservation
	}
	binds, err := split(b.Parts, g.perPod, pods)
	if err != nil {
		return fmt.Errorf("bind for %s: %w", b.OwnerID, err)
	}
	for i := range binds {
		c, err := s.fencer.claim(ctx, binds[i].pod)
		if err != nil {
			return fmt.Errorf("bind for %s: claiming %s: %w", b.OwnerID, key(binds[i].pod), err)
		}
		binds[i].pod = c
	}
	for _, pb := range binds {
		a := map[string]string{AnnGPUs: formatGPUs(pb.gpus)}
		if pb.inst > 0 {
			a[AnnMIGInstance] = fmt.Sprint(pb.inst)
		}
		for k, v := range ann {
			a[k] = v
		}
		if err := s.fencer.bind(ctx, pb.pod, pb.node, a, now); err != nil {
			// Earlier pods of the gang are bound and stay: the next
			// pass sees a running job and the rest of its pods. Only
			// a newer leader's claim gets here, since every pod was
			// claimed under this fence a moment ago.
			return fmt.Errorf("bind for %s: binding %s to %s: %w", b.OwnerID, key(pb.pod), pb.node, err)
		}
		s.assumeBind(pb.pod, pb.node, a, now)
		used[key(pb.pod)] = true
	}
	return nil
}

// evict asks the pods of a preemption to stop through the Eviction API,
// with the R3 deadline as the grace period: SIGTERM, checkpoint, exit,
// SIGKILL at the deadline, which is what the kubelet does with it.
func (s *Scheduler) evict(ctx context.Context, w *world, pr *sched.Preemption, now time.Time) error {
	grace := int64(math.Ceil(pr.Deadline.Sub(now).Seconds()))
	grace = max(grace, 1)
	var errs []error
	for _, id := range pr.Allocations {
		for _, p := range w.podsOf(id) {
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := s.evictPod(ctx, p, pr, grace, now); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// evictPod evicts one pod of a preemption, preconditioned on its UID.
func (s *Scheduler) evictPod(ctx context.Context, p *corev1.Pod, pr *sched.Preemption, grace int64, now time.Time) error {
	uid := p.UID
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}}}
	if err := s.cs.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("evicting %s for %s: %w", key(p), pr.For, err)
	}
	s.assumeEviction(p, grace, now)
	s.event(ctx, p, corev1.EventTypeNormal, "Preempted",
		fmt.Sprintf("preempted for %s: checkpoint and exit within %ds (R3 deadline); %.2f GPU-hours since the last checkpoint at risk", pr.For, grace, pr.LostGPUHours), now)
	return nil
}

// pending writes a pending pod's reason as its PodScheduled=False
// condition, and an Event when the reason changes.
func (s *Scheduler) pending(ctx context.Context, p *corev1.Pod, msg string, now time.Time) error {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return nil
		}
	}
	c := p.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.NewTime(now)}
	set := false
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == corev1.PodScheduled {
			c.Status.Conditions[i], set = cond, true
		}
	}
	if !set {
		c.Status.Conditions = append(c.Status.Conditions, cond)
	}
	if _, err := s.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: "berth"}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // the pod changed: the next pass says it again
		}
		return err
	}
	s.event(ctx, p, corev1.EventTypeWarning, "FailedScheduling", msg, now)
	return nil
}

// event posts a core/v1 Event about an object; failing to is logged, not
// fatal (events are best effort in Kubernetes too).
func (s *Scheduler) event(ctx context.Context, p *corev1.Pod, typ, reason, msg string, now time.Time) {
	s.eventOn(ctx, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}, typ, reason, msg, now)
}

func (s *Scheduler) eventOn(ctx context.Context, ref corev1.ObjectReference, typ, reason, msg string, now time.Time) {
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: ref.Name + ".", Namespace: ref.Namespace},
		InvolvedObject: ref, Reason: reason, Message: msg, Type: typ, Source: corev1.EventSource{Component: s.cfg.SchedulerName},
		FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now), Count: 1}
	if _, err := s.cs.CoreV1().Events(ref.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
		s.cfg.Logger.Warn("posting an event", "object", ref.Namespace+"/"+ref.Name, "reason", reason, "err", err)
	}
}
