package kube

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func migNode(capacity map[string]int64, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: labels}}
	n.Status.Capacity = corev1.ResourceList{}
	for name, v := range capacity {
		n.Status.Capacity[corev1.ResourceName(name)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	return n
}

// A node's MIG resources become GPUs after its whole ones, each instance
// named by its profile and sized by its slices, packed seven slices to a
// GPU; a node labelled into another pool keeps only its whole GPUs.
func TestMIGNodeLayout(t *testing.T) {
	n := migNode(map[string]int64{"nvidia.com/gpu": 2, "nvidia.com/mig-3g.40gb": 3, "nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-4g.40gb": 1,
		"nvidia.com/mig-9g.1gb": 1}, nil)
	m, ok := nodeOf(n, DefaultPodLabel, "sharing")
	if !ok || m.Pool != "sharing" || m.GPUs != 5 {
		t.Fatalf("node: ok %v pool %q GPUs %d, want the sharing pool and 2 whole + 3 MIG GPUs", ok, m.Pool, m.GPUs)
	}
	got := fmt.Sprint(m.MIG, m.MIGProfiles)
	want := "[[] [] [571 428] [428 428 142] [142]] [[] [] [4g.40gb 3g.40gb] [3g.40gb 3g.40gb 1g.10gb] [1g.10gb]]"
	if got != want {
		t.Fatalf("layout %s, want %s (9g is no profile and is left out)", got, want)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	m, _ = nodeOf(migNode(map[string]int64{"nvidia.com/gpu": 2, "nvidia.com/mig-3g.40gb": 2}, map[string]string{LabelPool: "training"}), DefaultPodLabel, "sharing")
	if m.GPUs != 2 || m.MIG != nil {
		t.Fatalf("a MIG node labelled into training: %d GPUs, MIG %v; want its 2 whole GPUs only", m.GPUs, m.MIG)
	}
	if _, ok := nodeOf(migNode(map[string]int64{"nvidia.com/mig-1g.10gb": 7}, nil), DefaultPodLabel, "sharing"); !ok {
		t.Fatal("a node of MIG instances only was left out")
	}
}

func TestPodMIG(t *testing.T) {
	pod := func(limits map[string]int64) *corev1.Pod {
		l := corev1.ResourceList{}
		for k, v := range limits {
			l[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
		}
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: l}}}}}
	}
	for _, c := range []struct {
		limits map[string]int64
		prof   string
		err    string
	}{
		{map[string]int64{"nvidia.com/gpu": 1}, "", ""},
		{map[string]int64{"nvidia.com/mig-3g.40gb": 1}, "3g.40gb", ""},
		{map[string]int64{"nvidia.com/mig-1c.3g.40gb": 1}, "1c.3g.40gb", ""},
		{map[string]int64{"nvidia.com/mig-3g.40gb": 2}, "", "one MIG instance per pod"},
		{map[string]int64{"nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 1}, "", "1g.10gb and 3g.40gb"},
		{map[string]int64{"nvidia.com/mig-3g.40gb": 1, "nvidia.com/gpu": 1}, "", "not both"},
		{map[string]int64{"nvidia.com/mig-big": 1}, "", "expected a MIG profile"},
	} {
		prof, err := podMIG(pod(c.limits))
		if prof != c.prof || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: %q %v, want %q and an error with %q", c.limits, prof, err, c.prof, c.err)
		}
	}
	if sh := migShape("7g.80gb"); sh.GPUMilli != 999 || sh.Validate("") != nil {
		t.Fatalf("7g: %+v %v, want 999 milli and a valid shape", sh, sh.Validate(""))
	}
	if sh := migShape("1c.3g.40gb"); sh.GPUMilli != 428 {
		t.Fatalf("1c.3g: %d milli, want 428", sh.GPUMilli)
	}
}

func (e *env) migNode(name string, capacity map[string]int64) {
	e.t.Helper()
	name = e.ns + "-" + name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{DefaultPodLabel: "leaf1", LabelGPUProduct: "H100"}}}
	n, err := kc.cs.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods: resource.MustParse("110")}
	for k, v := range capacity {
		n.Status.Capacity[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	n.Status.Allocatable = n.Status.Capacity
	if _, err := kc.cs.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.nodes = append(e.nodes, name)
}

// asksMIG makes a pod ask for one instance of a MIG profile instead of
// whole GPUs.
func asksMIG(prof string, n int64) podOpt {
	return func(p *corev1.Pod) {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		r := corev1.ResourceList{corev1.ResourceName(ResourceMIGPrefix + prof): q}
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: r, Requests: r}
	}
}

// MIG pods bind to a node with a free instance of exactly their profile,
// counted beside another scheduler's MIG pods; a pod whose profile has
// none free waits, saying so, even where a larger instance is free, and
// binds when one frees; whole-GPU pods go to whole GPUs.
func TestMIGPodsGetTheirProfile(t *testing.T) {
	e := newEnv(t)
	e.migNode("mig", map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-4g.40gb": 1, "nvidia.com/mig-1g.10gb": 1})
	e.node("whole", 8, "leaf1")
	e.pod("theirs", 0, e.on("mig"), asksMIG("3g.40gb", 1))
	e.pod("a", 0, asksMIG("3g.40gb", 1))
	e.pod("c", 0, asksMIG("1g.10gb", 1))
	e.pod("d", 0, asksMIG("1g.10gb", 2))
	e.pod("w", 1)
	s := e.scheduler(1)
	e.pass(s)
	for _, name := range []string{"a", "c"} {
		if node, _ := e.boundTo(name); node != "mig" || e.get(name).Annotations[AnnMIGInstance] == "" {
			t.Fatalf("%s bound to %q with instance %q, want the mig node and an instance", name, node, e.get(name).Annotations[AnnMIGInstance])
		}
	}
	if node, _ := e.boundTo("w"); node != "whole" {
		t.Fatalf("a whole-GPU pod bound to %q, want the whole node", node)
	}
	if msg := e.condition("d"); !strings.Contains(msg, "one MIG instance per pod") {
		t.Fatalf("a pod asking for two instances says %q", msg)
	}
	// Both 3g are now taken (theirs and a); the 4g is free but is not one.
	e.pod("b", 0, asksMIG("3g.40gb", 1))
	e.pass(s)
	if node, _ := e.boundTo("b"); node != "" {
		t.Fatalf("b bound to %s: the mig node's 3g instances are both taken", node)
	}
	if msg := e.condition("b"); !strings.Contains(msg, "profile 3g.40gb") || !strings.Contains(msg, "2 of them, 0 free") {
		t.Fatalf("b's PodScheduled message %q does not say both 3g.40gb instances are taken", msg)
	}
	// The two 3g pods are on different slots.
	var slots []string
	for _, p := range []string{"a"} {
		slots = append(slots, e.get(p).Annotations[AnnGPUs]+"/"+e.get(p).Annotations[AnnMIGInstance])
	}
	zero := int64(0)
	if err := kc.cs.CoreV1().Pods(e.ns).Delete(e.ctx, "theirs", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.pass(s)
	if node, _ := e.boundTo("b"); node != "mig" {
		t.Fatalf("b bound to %q once a 3g freed, want the mig node", node)
	}
	slots = append(slots, e.get("b").Annotations[AnnGPUs]+"/"+e.get("b").Annotations[AnnMIGInstance])
	if slots[0] == slots[1] {
		t.Fatalf("a and b counted on one slot %s", slots[0])
	}
	// A fresh scheduler (a restart) reads the same three instances taken.
	e.pod("e", 0, asksMIG("1g.10gb", 1))
	e.pass(e.scheduler(2))
	if node, _ := e.boundTo("e"); node != "" || !slices.ContainsFunc([]string{e.condition("e")}, func(m string) bool { return strings.Contains(m, "1 of them, 0 free") }) {
		t.Fatalf("e bound to %q, says %q: the one 1g.10gb is c's", node, e.condition("e"))
	}
}

// Another scheduler's pods hold every MIG instance they ask for, even
// ones berth would refuse to place itself: two instances in one pod, an
// init container's, or MIG beside whole GPUs.
func TestOtherSchedulersMIGPodsHoldTheirInstances(t *testing.T) {
	e := newEnv(t)
	e.migNode("mig", map[string]int64{"nvidia.com/mig-1g.10gb": 3, "nvidia.com/gpu": 1})
	// Two 1g.10gb in the main container, and an init container asking
	// for one (run before it: the pod holds two, not three); and the
	// node's whole GPU.
	two := func(p *corev1.Pod) {
		asksMIG("1g.10gb", 2)(p)
		p.Spec.Containers[0].Resources.Limits[ResourceGPU] = *resource.NewQuantity(1, resource.DecimalSI)
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceName(ResourceMIGPrefix + "1g.10gb"): *resource.NewQuantity(1, resource.DecimalSI)}}}}
	}
	e.pod("theirs", 0, e.on("mig"), two)
	e.pod("a", 0, asksMIG("1g.10gb", 1))
	e.pod("b", 0, asksMIG("1g.10gb", 1))
	e.pod("w", 1)
	s := e.scheduler(1)
	e.pass(s)
	bound := 0
	for _, name := range []string{"a", "b"} {
		if node, _ := e.boundTo(name); node == "mig" {
			bound++
		}
	}
	if bound != 1 {
		t.Fatalf("%d of a and b bound to the mig node; its third 1g.10gb is the only one free", bound)
	}
	if node, _ := e.boundTo("w"); node != "" {
		t.Fatalf("w bound to %q: the node's one whole GPU is theirs", node)
	}
}
