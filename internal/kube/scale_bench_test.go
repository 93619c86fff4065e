package kube

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// BenchmarkPassAtFleetScale is the in-memory part of a watching pass at
// issue 20's scale: 12,500 nodes of 8 GPUs (leaves of 32), each full with
// two bound 4-GPU berth pods, and about 100,000 pending pods (1, 2, 4 and
// 8 GPUs alone, and gangs of eight 8-GPU pods, topology pod), most of
// which cannot run. "read" builds the core's State from the objects an
// informer holds; "plan" is sched.Plan on it, the same call the server
// makes. What a pass adds against a real API server (the state
// ConfigMap's read and save, and a write per bind, eviction or changed
// reason) is measured by BenchmarkSteadyPass at 500 nodes.
func BenchmarkPassAtFleetScale(b *testing.B) {
	const nodes, perLeaf, pending = 12500, 32, 100_000
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(20, 23))
	gpu := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{ResourceGPU: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	team := func() string { return "team" + strconv.Itoa(rng.IntN(40)) }
	var ns []*corev1.Node
	var pods []*corev1.Pod
	capacity := corev1.ResourceList{ResourceGPU: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("128"),
		corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("110")}
	pod := func(ns, name string, gpus int64, at time.Time, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			CreationTimestamp: metav1.NewTime(at), Annotations: ann},
			Spec: corev1.PodSpec{SchedulerName: "berth", Containers: []corev1.Container{{Name: "m", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: gpu(gpus), Requests: gpu(gpus)}}}}}
	}
	for i := range nodes {
		name := fmt.Sprintf("n%05d", i)
		ns = append(ns, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{DefaultPodLabel: fmt.Sprintf("leaf%03d", i/perLeaf), LabelGPUProduct: "H100"}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity}})
		for k := range 2 {
			started := now.Add(-time.Duration(30+rng.IntN(600)) * time.Minute)
			p := pod(team(), fmt.Sprintf("run-%05d-%d", i, k), 4, started.Add(-time.Hour), map[string]string{
				AnnGPUs: formatGPUs(model.FullMask(4) << (4 * k)), AnnBoundAt: started.Format(time.RFC3339), AnnPriority: strconv.Itoa(rng.IntN(10))})
			p.Spec.NodeName = name
			pods = append(pods, p)
		}
	}
	for i := 0; i < pending; {
		at := now.Add(-time.Duration(rng.IntN(10000)) * time.Second)
		prio := map[string]string{AnnPriority: strconv.Itoa(rng.IntN(100))}
		if rng.IntN(5) > 0 {
			pods = append(pods, pod(team(), fmt.Sprintf("q-%06d", i), int64(1)<<rng.IntN(4), at, prio))
			i++
			continue
		}
		t := team()
		for k := range 8 {
			pods = append(pods, pod(t, fmt.Sprintf("g-%06d-%d", i, k), 8, at, map[string]string{AnnPriority: prio[AnnPriority],
				AnnGroup: fmt.Sprintf("g-%06d", i), AnnGroupSize: "8"}))
		}
		i += 8
	}
	cfg := sched.Config{MinRuntime: time.Nanosecond}
	w := read(ns, pods, nil, "berth", DefaultPodLabel, keptState{}, cfg, nil)
	if len(w.state.Nodes) != nodes || len(w.state.Allocations) != 2*nodes {
		b.Fatalf("read %d nodes, %d allocations", len(w.state.Nodes), len(w.state.Allocations))
	}
	b.Logf("%d pods, %d jobs (%d pods pending)", len(pods), len(w.state.Jobs), len(pods)-2*nodes)
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			read(ns, pods, nil, "berth", DefaultPodLabel, keptState{}, cfg, nil)
		}
	})
	b.Run("plan", func(b *testing.B) {
		for b.Loop() {
			sched.Plan(w.state, now)
		}
	})
}
