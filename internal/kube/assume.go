package kube

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// assumeTTL is how long a write berth made is assumed when the cache has
// not shown it: longer than any watch lag of a healthy API server, short
// enough that a write lost some other way (the pod deleted and recreated
// under the same name between two events) is not believed for long.
const assumeTTL = 30 * time.Second

// assumed is a write this scheduler made that its cache may not show
// yet: a bind (node and annotations) or an eviction (deleting since at).
// kube-scheduler keeps the same thing for the same reason: without it, a
// pass that reads the cache right after a bind sees the pod unbound and
// its GPUs free, and hands them out again.
type assumed struct {
	uid      types.UID
	node     string
	ann      map[string]string
	deleting *metav1.Time
	at       time.Time
}

// assumeBind records a bind that succeeded.
func (s *Scheduler) assumeBind(p *corev1.Pod, node string, ann map[string]string, now time.Time) {
	s.assumed[key(p)] = assumed{uid: p.UID, node: node, ann: ann, at: now}
}

// assumeEviction records an eviction that succeeded.
func (s *Scheduler) assumeEviction(p *corev1.Pod, grace int64, now time.Time) {
	a, ok := s.assumed[key(p)]
	if !ok || a.uid != p.UID {
		a = assumed{uid: p.UID}
	}
	t := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
	a.deleting, a.at = &t, now
	s.assumed[key(p)] = a
}

// overlay applies the assumed writes to a read of the cache: a pod the
// cache shows as it was before berth's write is replaced by a copy as
// written. An entry goes once the cache shows the write (or the pod is
// gone, or another pod has its name), or after assumeTTL.
func (s *Scheduler) overlay(pods []*corev1.Pod, now time.Time) []*corev1.Pod {
	if len(s.assumed) == 0 {
		return pods
	}
	seen := make(map[string]bool, len(s.assumed))
	for i, p := range pods {
		k := key(p)
		a, ok := s.assumed[k]
		if !ok {
			continue
		}
		seen[k] = true
		bound := a.node == "" || p.Spec.NodeName != ""
		deleting := a.deleting == nil || p.DeletionTimestamp != nil
		if p.UID != a.uid || bound && deleting || now.Sub(a.at) > assumeTTL {
			delete(s.assumed, k)
			continue
		}
		c := p.DeepCopy()
		if !bound {
			c.Spec.NodeName = a.node
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			for k, v := range a.ann {
				c.Annotations[k] = v
			}
		}
		if !deleting {
			c.DeletionTimestamp = a.deleting
		}
		pods[i] = c
	}
	for k := range s.assumed {
		if !seen[k] {
			delete(s.assumed, k) // the pod is gone (or finished): nothing to assume
		}
	}
	return pods
}
