package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	c, err := f.claimAs(ctx, p)
	if !apierrors.IsConflict(err) {
		return c, err
	}
	// The pod read was older than the pod (a watch cache a moment
	// behind, or this leader's own Takeover): read it again and claim
	// that one if it is still the unbound pod the pass planned for.
	fresh, err := f.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if fresh.UID != p.UID || fresh.Spec.NodeName != "" || fresh.DeletionTimestamp != nil {
		return nil, fmt.Errorf("pod %s changed since it was read (bound, deleting or replaced): the next pass plans again", key(p))
	}
	return f.claimAs(ctx, fresh)
}

func (f *fencer) claimAs(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
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

// bind binds a claimed pod to node with the annotations ann (to which it
// adds the bind time), preconditioned
// on the claimed pod's UID and resourceVersion: a pod claimed since by a
// newer leader fails with a conflict.
func (f *fencer) bind(ctx context.Context, p *corev1.Pod, node string, ann map[string]string, now time.Time) error {
	if fenceOf(p) != f.fence {
		return fmt.Errorf("pod %s: bind of a pod this leader has not claimed", key(p))
	}
	ann[AnnBoundAt] = now.UTC().Format(time.RFC3339)
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, Annotations: ann},
		Target: corev1.ObjectReference{Kind: "Node", Name: node},
	}
	return f.cs.CoreV1().Pods(p.Namespace).Bind(ctx, b, metav1.CreateOptions{FieldManager: "berth"})
}
