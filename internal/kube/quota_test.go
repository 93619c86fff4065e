package kube

import (
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// Quotas map onto namespaces: the namespace is the team, its org the
// Namespace's berth.dev/org label (default "default"), the tree the
// config's quotas. A team's guaranteed GPUs take non-preemptible pods;
// beyond them only preemptible pods borrow, up to max_gpus; another
// namespace's quota is its own.
func TestNamespaceQuotas(t *testing.T) {
	e := newEnv(t)
	ns, err := kc.cs.CoreV1().Namespaces().Get(e.ctx, e.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{LabelOrg: "ml"}
	if _, err := kc.cs.CoreV1().Namespaces().Update(e.ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := e.otherNamespace("free")
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		e.node(n, 8, "leaf1")
	}
	cfg := Config{Namespace: e.ns, Sched: sched.Config{MinRuntime: time.Nanosecond}, Quotas: []model.Quota{
		{Scope: "ml/" + e.ns, GuaranteedGPUs: 8, MaxGPUs: 16},
		{Scope: DefaultOrg + "/" + other, GuaranteedGPUs: 8},
	}}
	s := New(kc.cs, cfg, 1)
	pre := ann(AnnPreemptible, "true", AnnCheckpoint, "s3://ckpt/x", AnnCheckpointBytes, "1000000000")
	// One priority, created in one second: the queue is by name.
	e.pod("a", 8)
	e.pod("b", 8)
	e.pod("c", 8, pre)
	e.pod("d", 8, pre)
	e.pod("x", 8, in(other))
	e.pass(s)
	for _, name := range []string{"a", "c"} {
		if node, _ := e.boundTo(name); node == "" {
			t.Fatalf("%s not bound: %s", name, e.condition(name))
		}
	}
	if node, _ := e.boundTo("b"); node != "" || !strings.Contains(e.condition("b"), "beyond its guaranteed quota") {
		t.Fatalf("b (not preemptible, past ml/%s's 8 guaranteed GPUs) bound to %q, says %q", e.ns, node, e.condition("b"))
	}
	if node, _ := e.boundTo("d"); node != "" || !strings.Contains(e.condition("d"), "quota ml/"+e.ns+": max_gpus is 16") {
		t.Fatalf("d (borrowing past ml/%s's max of 16) bound to %q, says %q", e.ns, node, e.condition("d"))
	}
	x, err := kc.cs.CoreV1().Pods(other).Get(e.ctx, "x", metav1.GetOptions{})
	if err != nil || x.Spec.NodeName == "" {
		t.Fatalf("x in %s (org default, 8 guaranteed) not bound: %v", other, err)
	}
	// The next pass reads c as borrowed and a as within the guarantee:
	// borrowed work yields first, and nothing on the pods says which.
	nodes, pods, err := listSource{kc.cs}.list(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	orgs, err := listSource{kc.cs}.orgs(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := read(nodes, pods, orgs, "berth", DefaultPodLabel, keptState{}, cfg.Sched, cfg.Quotas)
	borrowed := map[string]bool{}
	for _, a := range w.state.Allocations {
		borrowed[a.OwnerID] = a.Borrowed
	}
	if want := map[string]bool{e.ns + "/a": false, e.ns + "/c": true, other + "/x": false}; !maps.Equal(borrowed, want) {
		t.Fatalf("borrowed by owner %v, want %v", borrowed, want)
	}
	// A second non-preemptible pod there is past default/<other>'s
	// guarantee, whatever ml's quota says.
	e.pod("y", 8, in(other))
	e.pass(s)
	y, err := kc.cs.CoreV1().Pods(other).Get(e.ctx, "y", metav1.GetOptions{})
	if err != nil || y.Spec.NodeName != "" || !strings.Contains(conditionOf(y), "beyond its guaranteed quota") {
		t.Fatalf("y in %s bound to %q, says %q (%v)", other, y.Spec.NodeName, conditionOf(y), err)
	}
	// An org label that is not an org name is the pending reason.
	ns, _ = kc.cs.CoreV1().Namespaces().Get(e.ctx, e.ns, metav1.GetOptions{})
	ns.Labels[LabelOrg] = "ML"
	if _, err := kc.cs.CoreV1().Namespaces().Update(e.ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.pass(s)
	if msg := e.condition("b"); !strings.Contains(msg, "label "+LabelOrg+`: "ML"`) {
		t.Fatalf("b under a namespace labelled org ML says %q", msg)
	}
}

func TestCheckQuotas(t *testing.T) {
	if err := CheckQuotas([]model.Quota{{Scope: "ml", GuaranteedGPUs: 64}, {Scope: "ml/nlp", GuaranteedGPUs: 8, MaxGPUs: 16}}); err != nil {
		t.Fatal(err)
	}
	for want, qs := range map[string][]model.Quota{
		"quotas[0].scope":               {{Scope: ""}},
		"org or org/namespace":          {{Scope: "ml/nlp/alice", GuaranteedGPUs: 1}},
		"given twice":                   {{Scope: "ml"}, {Scope: "ml"}},
		"expected lowercase":            {{Scope: "ml/NLP"}},
		"quotas[1].max_gpus":            {{Scope: "ml"}, {Scope: "ml/nlp", GuaranteedGPUs: 8, MaxGPUs: 4}},
		"quotas[0].guaranteed_gpus: -1": {{Scope: "ml", GuaranteedGPUs: -1}},
	} {
		if err := CheckQuotas(qs); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want an error with %q", qs, err, want)
		}
	}
}

// otherNamespace creates a second namespace for this test, removed with
// its pods at the end.
func (e *env) otherNamespace(suffix string) string {
	e.t.Helper()
	name := e.ns + "-" + suffix
	if _, err := kc.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		zero := int64(0)
		kc.cs.CoreV1().Pods(name).DeleteCollection(e.ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	})
	return name
}

// in puts a pod in namespace ns instead of the test's.
func in(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

// conditionOf is a pod's PodScheduled=False message.
func conditionOf(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}
