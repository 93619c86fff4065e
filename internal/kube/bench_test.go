package kube

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkSteadyPass is one pass with nothing new to do, on 500 nodes of
// 8 GPUs full of 4,000 bound 1-GPU pods and 200 pending 8-GPU pods whose
// reasons are already on them: the cost of reading the cluster (two
// consistent lists, or the informers' caches, and the state ConfigMap),
// planning, and saving.
func BenchmarkSteadyPass(b *testing.B) {
	ctx := context.Background()
	e := &env{t: b, ctx: ctx, ns: fmt.Sprintf("b%d", seq.Add(1))}
	if _, err := kc.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		zero := int64(0)
		kc.cs.CoreV1().Pods(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		for _, n := range e.nodes {
			kc.cs.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		}
	}()
	const nodes, perNode, pending = 500, 8, 200
	q := *resource.NewQuantity(1, resource.DecimalSI)
	for i := range nodes {
		e.node(fmt.Sprintf("n%03d", i), perNode, fmt.Sprintf("leaf%d", i/32))
		for g := range perNode {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%03d-%d", i, g), Namespace: e.ns},
				Spec: corev1.PodSpec{NodeName: e.ns + fmt.Sprintf("-n%03d", i), Containers: []corev1.Container{{Name: "m", Image: "x",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: q}}}}}}
			if _, err := kc.cs.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for i := range pending {
		e.pod(fmt.Sprintf("p%03d", i), 8)
	}
	run := func(b *testing.B, s *Scheduler) {
		if _, err := s.Pass(ctx); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.Pass(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	// lists: Nodes and Pods listed every pass (Scheduler as New makes it).
	b.Run("lists", func(b *testing.B) { run(b, e.scheduler(1)) })
	// watch: read from informers, as `berth kube` runs.
	b.Run("watch", func(b *testing.B) {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s := e.scheduler(1)
		if err := s.Watch(wctx); err != nil {
			b.Fatal(err)
		}
		run(b, s)
	})
}
