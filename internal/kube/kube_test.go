package kube

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An 8-GPU tensor-parallel pod lands whole on one node, and says which
// GPUs, although 10 GPUs are free across the two nodes it could not span.
func TestTensorParallelPodLandsWholeOnOneNode(t *testing.T) {
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	e.node("b", 8, "leaf1")
	e.node("c", 8, "leaf1")
	e.pod("other-a", 3, e.on("a"))
	e.pod("other-b", 3, e.on("b"))
	e.pod("tp8", 8)
	s := e.scheduler(1)
	e.pass(s)
	node, gpus := e.boundTo("tp8")
	if node != "c" || gpus != "0,1,2,3,4,5,6,7" {
		t.Fatalf("tp8 bound to %q GPUs %q, want node c GPUs 0-7", node, gpus)
	}
	// A second one has no whole node left: it waits and says so.
	e.pod("tp8-2", 8)
	e.pass(s)
	if node, _ := e.boundTo("tp8-2"); node != "" {
		t.Fatalf("tp8-2 bound to %s with no 8 free GPUs in one node", node)
	}
	msg := e.condition("tp8-2")
	if !strings.Contains(msg, "8") || !strings.Contains(msg, "node") {
		t.Fatalf("tp8-2's PodScheduled message %q does not say it needs 8 GPUs in one node", msg)
	}
	if ev := e.events("tp8-2"); len(ev) != 1 || !strings.HasPrefix(ev[0], "FailedScheduling: ") {
		t.Fatalf("events for tp8-2 = %q, want one FailedScheduling", ev)
	}
	// The same reason a second pass is not a second event.
	e.pass(s)
	if ev := e.events("tp8-2"); len(ev) != 1 {
		t.Fatalf("events for tp8-2 after two passes = %q, want one", ev)
	}
}

// A 4-pod gang binds all or none: with three GPUs free none of its pods
// is bound; once a node with room joins, all four are, on that node.
func TestGangBindsAllOrNone(t *testing.T) {
	e := newEnv(t)
	e.node("a", 4, "leaf1")
	e.pod("other", 1, e.on("a"))
	gang := []string{"w-0", "w-1", "w-2", "w-3"}
	for _, n := range gang[:3] {
		e.pod(n, 1, ann(AnnGroup, "job1", AnnGroupSize, "4", AnnTopology, "node"))
	}
	s := e.scheduler(1)
	e.pass(s)
	if msg := e.condition("w-0"); !strings.Contains(msg, "3 of its 4 pods") {
		t.Fatalf("w-0 with its gang incomplete says %q", msg)
	}
	e.pod("w-3", 1, ann(AnnGroup, "job1", AnnGroupSize, "4", AnnTopology, "node"))
	e.pass(s)
	for _, n := range gang {
		if node, _ := e.boundTo(n); node != "" {
			t.Fatalf("%s bound to %s with 3 GPUs free for a 4-GPU gang", n, node)
		}
		if msg := e.condition(n); msg == "" || strings.Contains(msg, "of its 4 pods") {
			t.Fatalf("%s's pending message %q does not give the placement reason", n, msg)
		}
	}
	e.node("b", 4, "leaf1")
	e.pass(s)
	seen := map[string]bool{}
	for _, n := range gang {
		node, gpus := e.boundTo(n)
		if node != "b" {
			t.Fatalf("%s bound to %q, want b (the gang is node-topology)", n, node)
		}
		if seen[gpus] {
			t.Fatalf("two pods of the gang were given GPU %s", gpus)
		}
		seen[gpus] = true
	}
}

// A 64-GPU pod-topology gang waits for one leaf switch with 64 free GPUs:
// 112 are free, 56 in each leaf, and its condition says so. When a node
// frees in one leaf, all eight pods bind inside it.
func TestPodGangWaitsForOneLeaf(t *testing.T) {
	e := newEnv(t)
	for _, leaf := range []string{"l1", "l2"} {
		for i := range 8 {
			e.node(leaf+"n"+string(rune('0'+i)), 8, leaf)
		}
		e.pod("busy-"+leaf, 8, e.on(leaf+"n0"))
	}
	var gang []string
	for i := range 8 {
		n := "g-" + string(rune('0'+i))
		gang = append(gang, n)
		e.pod(n, 8, ann(AnnGroup, "big", AnnGroupSize, "8", AnnTopology, "pod"))
	}
	s := e.scheduler(1)
	d := e.pass(s)
	for _, n := range gang {
		if node, _ := e.boundTo(n); node != "" {
			t.Fatalf("%s bound to %s: no leaf has 64 free GPUs", n, node)
		}
	}
	msg := e.condition("g-0")
	if !strings.Contains(msg, "pod") || !strings.Contains(msg, "56") {
		t.Fatalf("g-0's message %q does not say the largest leaf set is 56", msg)
	}
	if len(d.Pending) == 0 {
		t.Fatal("no pending entry for the gang")
	}
	zero := int64(0)
	if err := kc.cs.CoreV1().Pods(e.ns).Delete(e.ctx, "busy-l2", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.pass(s)
	nodes := map[string]bool{}
	for _, n := range gang {
		node, gpus := e.boundTo(n)
		if !strings.HasPrefix(node, "l2") || gpus != "0,1,2,3,4,5,6,7" {
			t.Fatalf("%s bound to %q GPUs %q, want a whole node of leaf l2", n, node, gpus)
		}
		nodes[node] = true
	}
	if len(nodes) != 8 {
		t.Fatalf("the gang's 8 pods share nodes: %v", nodes)
	}
}

// An inference Deployment scaling up evicts preemptible training in
// §7's order (lowest priority first), with the R3 deadline as grace;
// once the kubelet lets the pods go, the replicas bind where they were.
func TestInferenceScaleUpEvictsTrainingInOrder(t *testing.T) {
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	e.node("b", 8, "leaf1")
	train := func(name, prio string) {
		e.pod(name, 8, ann(AnnPreemptible, "true", AnnCheckpoint, "s3://ckpt/"+name, AnnCheckpointBytes, "100000000000", AnnPriority, prio))
	}
	train("high", "10")
	train("low", "1")
	s := e.scheduler(1)
	e.pass(s)
	for _, n := range []string{"high", "low"} {
		if node, _ := e.boundTo(n); node == "" {
			t.Fatalf("%s not bound on an empty fleet", n)
		}
	}
	lowNode, _ := e.boundTo("low")
	rs := e.replicaSet("web")
	e.pod("web-1", 8, ownedBy(rs), ann(AnnMinReplicas, "1"))
	d := e.pass(s)
	if len(d.Preemptions) != 1 || d.Preemptions[0].JobID != e.ns+"/low" {
		t.Fatalf("preemptions = %+v, want the low-priority job's", d.Preemptions)
	}
	low, high := e.get("low"), e.get("high")
	if low.DeletionTimestamp == nil || high.DeletionTimestamp != nil {
		t.Fatalf("evicted: low %v, high %v; want low only", low.DeletionTimestamp, high.DeletionTimestamp)
	}
	grace := *low.DeletionGracePeriodSeconds
	want := d.Preemptions[0].Deadline.Sub(s.cfg.Clock()).Seconds()
	if float64(grace) < want-5 || float64(grace) > want+5 || grace < 2 {
		t.Fatalf("grace period %ds, want the R3 deadline ≈ %.0fs", grace, want)
	}
	if ev := e.events("low"); len(ev) != 1 || !strings.HasPrefix(ev[0], "Preempted: ") {
		t.Fatalf("low's events = %q", ev)
	}
	// Still terminating: the GPUs are not free, the replica waits.
	e.pass(s)
	if node, _ := e.boundTo("web-1"); node != "" {
		t.Fatalf("web-1 bound to %s while the evicted pod still holds its GPUs", node)
	}
	e.kubelet()
	e.pass(s)
	node, _ := e.boundTo("web-1")
	if node != lowNode {
		t.Fatalf("web-1 bound to %q, want %s where low ran", node, lowNode)
	}
	if r := e.get("web-1").Annotations[AnnReplica]; r == "" {
		t.Fatal("web-1 carries no replica index")
	}
	// Budget history survives the scheduler: a new one reads it back.
	kept, err := (&stateStore{cs: kc.cs, namespace: e.ns, name: "berth-scheduler"}).load(e.ctx)
	if err != nil || len(kept.Preemptions) != 1 || kept.Preemptions[0].JobID != e.ns+"/low" {
		t.Fatalf("kept preemptions = %+v (%v), want the one made", kept.Preemptions, err)
	}
}

// A deposed leader's bind fails: once the new leader has taken over, the
// old one's bind of a pod it had claimed conflicts, its claims are
// refused, and its passes stop before writing.
func TestDeposedLeaderBindFails(t *testing.T) {
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	p := e.pod("job", 4)
	old := e.scheduler(1)
	claimed, err := old.fencer.claim(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	neu := e.scheduler(2)
	if err := neu.Takeover(e.ctx); err != nil {
		t.Fatal(err)
	}
	err = old.fencer.bind(e.ctx, claimed, e.ns+"-a", map[string]string{AnnGPUs: "0,1,2,3"}, old.cfg.Clock())
	if !apierrors.IsConflict(err) {
		t.Fatalf("deposed leader's bind: %v, want a conflict", err)
	}
	if _, err := old.fencer.claim(e.ctx, e.get("job")); !errors.Is(err, ErrDeposed) {
		t.Fatalf("deposed leader's claim: %v, want ErrDeposed", err)
	}
	if _, err := old.Pass(e.ctx); !errors.Is(err, ErrDeposed) {
		t.Fatalf("deposed leader's pass: %v, want ErrDeposed", err)
	}
	if node, _ := e.boundTo("job"); node != "" {
		t.Fatalf("job bound to %s by the deposed leader", node)
	}
	e.pass(neu)
	if node, gpus := e.boundTo("job"); node != "a" || len(strings.Split(gpus, ",")) != 4 {
		t.Fatalf("new leader bound job to %q GPUs %q", node, gpus)
	}
	if f := e.get("job").Annotations[AnnFence]; f != "2" {
		t.Fatalf("job's fence = %q, want 2", f)
	}
}

// Bad annotations are a reason on the pod naming the annotation, never a
// panic or a partial bind.
func TestBadAnnotationsNameTheField(t *testing.T) {
	e := newEnv(t)
	e.node("a", 8, "leaf1")
	e.pod("x", 1, ann(AnnTopology, "rack"))
	e.pod("y", 1, ann(AnnPreemptible, "true"))
	e.pod("z", 1, ann(AnnGroup, "g", AnnGroupSize, "two"))
	e.pod("cpu-only", 0)
	s := e.scheduler(1)
	e.pass(s)
	for name, want := range map[string]string{"x": AnnTopology, "y": AnnCheckpoint, "z": AnnGroupSize, "cpu-only": "nvidia.com/gpu"} {
		if node, _ := e.boundTo(name); node != "" {
			t.Fatalf("%s bound to %s", name, node)
		}
		if msg := e.condition(name); !strings.Contains(msg, want) {
			t.Fatalf("%s's reason %q does not name %s", name, msg, want)
		}
	}
}
