package kube

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

var seq atomic.Int64

// env is one test's namespace and nodes on the shared apiserver; the
// nodes and pods go when the test ends, so tests see only their own.
type env struct {
	t     testing.TB
	ctx   context.Context
	ns    string
	nodes []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), ns: fmt.Sprintf("t%d", seq.Add(1))}
	if _, err := kc.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		kc.cs.CoreV1().Pods(e.ns).DeleteCollection(e.ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		for _, n := range e.nodes {
			kc.cs.CoreV1().Nodes().Delete(e.ctx, n, metav1.DeleteOptions{})
		}
		kc.cs.CoreV1().ConfigMaps(e.ns).Delete(e.ctx, "berth-scheduler", metav1.DeleteOptions{})
	})
	return e
}

// scheduler is a berth scheduler for this test, its state in the test's
// namespace, with the minimum runtime before preemption off.
func (e *env) scheduler(fence int64) *Scheduler {
	cfg := Config{Namespace: e.ns, Sched: sched.Config{MinRuntime: time.Nanosecond}}
	return New(kc.cs, cfg, fence)
}

func (e *env) node(name string, gpus int, leaf string) {
	e.t.Helper()
	name = e.ns + "-" + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{DefaultPodLabel: leaf, LabelGPUProduct: "H100"}}}
	n, err := kc.cs.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Status.Capacity = corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
		corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Allocatable = n.Status.Capacity
	if _, err := kc.cs.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.nodes = append(e.nodes, name)
}

// twoLeaves creates two leaves of four 8-GPU nodes, l1n0..l2n3, and
// returns them as the core's model sees them.
func (e *env) twoLeaves() []model.Node {
	e.t.Helper()
	var nodes []model.Node
	for _, leaf := range []string{"l1", "l2"} {
		for i := range 4 {
			id := fmt.Sprintf("%sn%d", leaf, i)
			e.node(id, 8, leaf)
			nodes = append(nodes, model.Node{ID: e.ns + "-" + id, Pod: leaf, Model: "H100", GPUs: 8,
				CPUMilli: 128000, MemoryMiB: 1 << 20, Health: model.HealthHealthy})
		}
	}
	return nodes
}

type podOpt func(*corev1.Pod)

func ann(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// on creates the pod already bound (another scheduler's work).
func (e *env) on(node string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeName, p.Spec.SchedulerName = e.ns+"-"+node, "default-scheduler" }
}

func ownedBy(rs *appsv1.ReplicaSet) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}}
	}
}

func (e *env) pod(name string, gpus int, opts ...podOpt) *corev1.Pod {
	e.t.Helper()
	q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{SchedulerName: "berth", Containers: []corev1.Container{{Name: "main", Image: "trainer:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: q}, Requests: corev1.ResourceList{ResourceGPU: q}}}}}}
	for _, o := range opts {
		o(p)
	}
	p, err := kc.cs.CoreV1().Pods(p.Namespace).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) replicaSet(name string) *appsv1.ReplicaSet {
	e.t.Helper()
	one := int32(1)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: appsv1.ReplicaSetSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "serve", Image: "server:1"}}}}}}
	rs, err := kc.cs.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func (e *env) get(name string) *corev1.Pod {
	e.t.Helper()
	p, err := kc.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// pass runs one pass and fails the test on an error.
func (e *env) pass(s *Scheduler) *sched.Decision {
	e.t.Helper()
	d, err := s.Pass(e.ctx)
	if err != nil {
		e.t.Fatalf("pass: %v", err)
	}
	return d
}

// boundTo is the node (without the test's prefix) and GPUs a pod was
// bound to; "" when unbound.
func (e *env) boundTo(name string) (string, string) {
	p := e.get(name)
	return strings.TrimPrefix(p.Spec.NodeName, e.ns+"-"), p.Annotations[AnnGPUs]
}

// condition is the pod's PodScheduled=False message.
func (e *env) condition(name string) string { return conditionOf(e.get(name)) }

// events are the reasons and messages of the Events about a pod.
func (e *env) events(name string) []string {
	e.t.Helper()
	l, err := kc.cs.CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range l.Items {
		out = append(out, ev.Reason+": "+ev.Message)
	}
	return out
}

// kubelet plays the part of a node's kubelet for pods being deleted: the
// workload exited, the pod goes.
func (e *env) kubelet() {
	e.t.Helper()
	l, err := kc.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	zero := int64(0)
	for _, p := range l.Items {
		if p.DeletionTimestamp != nil {
			kc.cs.CoreV1().Pods(e.ns).Delete(e.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	}
}
