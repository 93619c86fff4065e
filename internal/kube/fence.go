package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrDeposed is returned when a write finds a newer leader's fence.
var ErrDeposed = errors.New("a newer berth leader has fenced this object: this replica no longer leads")

// fencer writes pods under one leader's fence.
type fencer struct {
	cs    kubernetes.Interface
	fence int64
}

func fenceOf(p *corev1.Pod) int64 {
	f, _ := strconv.ParseInt(p.Annotations[AnnFence], 10, 64)
	return f
}

// claim records the fence on an unbound pod and returns the pod as
// written: its resourceVersion is the precondition of the bind. The
// update itself carries the resourceVersion read, so a pod another leader
// claimed since fails here.
func (f *fencer) claim(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	switch have := fenceOf(p); {
	case have > f.fence:
		return nil, fmt.Errorf("pod %s: fence %d > %d: %w", key(p), have, f.fence, ErrDeposed)
	case have == f.fence:
		return p, nil
	}
	c := p.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnFence] = strconv.FormatInt(f.fence, 10)
	return f.cs.CoreV1().Pods(p.Namespace).Update(ctx, c, metav1.UpdateOptions{FieldManager: "berth"})
}

// bind binds a claimed pod to node with its GPU indices, preconditioned
// on the claimed pod's UID and resourceVersion: a pod claimed since by a
// newer leader fails with a conflict.
func (f *fencer) bind(ctx context.Context, p *corev1.Pod, node string, ann map[string]string, now time.Time) error {
	if fenceOf(p) != f.fence {
		return fmt.Errorf("pod %s: bind of a pod this leader has not claimed", key(p))
	}
	a := map[string]string{AnnBoundAt: now.UTC().Format(time.RFC3339)}
	for k, v := range ann {
		a[k] = v
	}
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, Annotations: a},
		Target: corev1.ObjectReference{Kind: "Node", Name: node},
	}
	return f.cs.CoreV1().Pods(p.Namespace).Bind(ctx, b, metav1.CreateOptions{FieldManager: "berth"})
}
