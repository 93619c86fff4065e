package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

func TestSplitHandsWholePodsOut(t *testing.T) {
	pods := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}, {ObjectMeta: metav1.ObjectMeta{Name: "c"}}}
	parts := []sched.Part{{Node: "n1", GPUs: 0b1111}, {Node: "n2", GPUs: 0b110000}}
	got, err := split(parts, 2, pods)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a n1 0,1", "b n1 2,3", "c n2 4,5"}
	for i, pb := range got {
		if s := pb.pod.Name + " " + pb.node + " " + formatGPUs(pb.gpus); s != want[i] {
			t.Fatalf("pod %d: %s, want %s", i, s, want[i])
		}
	}
	if _, err := split([]sched.Part{{Node: "n1", GPUs: 0b111}, {Node: "n2", GPUs: 0b111}}, 2, pods); err == nil || !strings.Contains(err.Error(), "not a multiple of the 2") {
		t.Fatalf("3 GPUs on a node for 2-GPU pods: %v", err)
	}
	if _, err := split(parts, 2, pods[:2]); err == nil {
		t.Fatal("a placement for 3 pods applied to 2")
	}
}

func TestGPUAnnotationRoundTrips(t *testing.T) {
	for _, m := range []model.GPUMask{1, 0b10110, model.FullMask(8)} {
		got, err := parseGPUs(formatGPUs(m), 8)
		if err != nil || got != m {
			t.Fatalf("%s: got %s, %v", m, got, err)
		}
	}
	for _, bad := range []string{"", "8", "-1", "a", "1,,2"} {
		if _, err := parseGPUs(bad, 8); err == nil || !strings.Contains(err.Error(), AnnGPUs) {
			t.Fatalf("%q on an 8-GPU node: %v, want an error naming %s", bad, err, AnnGPUs)
		}
	}
}
