package kube

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berthsched/berth/internal/model"
)

// The annotations a pod carries. Users set the first group; berth sets
// the second when it binds.
const (
	// AnnGroup names the pod group (gang) a pod belongs to: pods of one
	// namespace with the same group are placed all or none.
	AnnGroup = "berth.dev/group"
	// AnnGroupSize is how many pods the group has; it waits until all
	// exist. Default: the pods that exist.
	AnnGroupSize = "berth.dev/group-size"
	// AnnTopology is the group's declared topology: node, pod or any.
	// Default node for a single pod, pod for a group.
	AnnTopology = "berth.dev/topology"
	// AnnPriority orders work of one kind; default the pod's priority.
	AnnPriority = "berth.dev/priority"
	// AnnPreemptible marks training that may yield ("true"); it must say
	// where it checkpoints (AnnCheckpoint).
	AnnPreemptible = "berth.dev/preemptible"
	// AnnCheckpoint is where a preemptible job checkpoints; AnnCheckpointBytes
	// its size, from which the R3 deadline (the eviction's grace period)
	// is set.
	AnnCheckpoint      = "berth.dev/checkpoint"
	AnnCheckpointBytes = "berth.dev/checkpoint-bytes"
	// AnnKind overrides the kind: training or inference. Pods owned by a
	// ReplicaSet are inference, everything else training.
	AnnKind = "berth.dev/kind"
	// AnnDeployment names the inference deployment a pod is a replica
	// of, for pods no ReplicaSet owns. AnnMinReplicas is its availability
	// floor (§7: below it, inference may preempt past the budget).
	AnnDeployment  = "berth.dev/deployment"
	AnnMinReplicas = "berth.dev/min-replicas"

	// AnnGPUs is the GPU indices berth chose on the node ("0,1,2,3"), for
	// the device layer.
	AnnGPUs = "berth.dev/gpus"
	// AnnFence is the fence of the last leader that claimed the pod.
	AnnFence = "berth.dev/fence"
	// AnnReplica is the replica index of an inference pod.
	AnnReplica = "berth.dev/replica"
	// AnnBoundAt is when berth bound the pod (RFC 3339).
	AnnBoundAt = "berth.dev/bound-at"
	// AnnBackfill names the reservation a backfilled pod runs inside.
	AnnBackfill = "berth.dev/backfill"
)

// Resource names and labels read from Nodes.
const (
	ResourceGPU = corev1.ResourceName("nvidia.com/gpu")
	// LabelGPUProduct is GPU feature discovery's model label.
	LabelGPUProduct = "nvidia.com/gpu.product"
	// LabelPool puts a node in a berth pool (sched.Pools).
	LabelPool = "berth.dev/pool"
	// DefaultPodLabel is the node label naming its leaf switch.
	DefaultPodLabel = "berth.dev/leaf"
)

// podGPUs is the whole GPUs a pod asks for: nvidia.com/gpu limits (an
// extended resource's request must equal its limit), summed over its
// containers; init containers run before and take the larger.
func podGPUs(p *corev1.Pod) int64 {
	sum := func(cs []corev1.Container) int64 {
		var n int64
		for i := range cs {
			q, ok := cs[i].Resources.Limits[ResourceGPU]
			if !ok {
				q = cs[i].Resources.Requests[ResourceGPU]
			}
			n += q.Value()
		}
		return n
	}
	n := sum(p.Spec.Containers)
	for i := range p.Spec.InitContainers {
		c := p.Spec.InitContainers[i : i+1]
		if m := sum(c); m > n {
			n = m
		}
	}
	return n
}

// podRequests is a pod's CPU (milli) and memory (MiB) requests.
func podRequests(p *corev1.Pod) (int64, int64) {
	var cpu, mem int64
	for i := range p.Spec.Containers {
		r := p.Spec.Containers[i].Resources.Requests
		if q, ok := r[corev1.ResourceCPU]; ok {
			cpu += q.MilliValue()
		}
		if q, ok := r[corev1.ResourceMemory]; ok {
			mem += q.Value() >> 20
		}
	}
	return cpu, mem
}

// nodeOf maps a Node to berth's model; ok is false for a node without
// GPUs, which berth does not schedule onto. A node with MIG instances is
// in the sharing pool unless its label puts it elsewhere; only there are
// its instances counted (shares go nowhere else), after its whole GPUs.
func nodeOf(n *corev1.Node, podLabel, sharing string) (model.Node, bool) {
	gpus := n.Status.Capacity[ResourceGPU]
	g := min(gpus.Value(), model.MaxGPUsPerNode)
	pool, labelled := n.Labels[LabelPool]
	var mig [][]int
	var profiles [][]string
	if byProfile := nodeMIG(n); len(byProfile) > 0 {
		if !labelled {
			pool = sharing
		}
		if pool == sharing {
			mig, profiles = migLayout(byProfile)
			room := min(len(mig), model.MaxGPUsPerNode-int(g))
			mig, profiles = mig[:room], profiles[:room]
		}
	}
	if g < 1 && len(mig) == 0 {
		return model.Node{}, false
	}
	if len(mig) > 0 {
		// The whole GPUs come first and have no layout.
		mig = append(make([][]int, g), mig...)
		profiles = append(make([][]string, g), profiles...)
		g = int64(len(mig))
	}
	alloc := n.Status.Allocatable
	if alloc == nil {
		alloc = n.Status.Capacity
	}
	cpu, mem := quantity(alloc, corev1.ResourceCPU), quantity(alloc, corev1.ResourceMemory)
	m := model.Node{ID: n.Name, Pod: n.Labels[podLabel], Pool: pool,
		Model: n.Labels[LabelGPUProduct], GPUs: int(g), CPUMilli: cpu.MilliValue(), MemoryMiB: mem.Value() >> 20,
		Health: model.HealthHealthy, Draining: n.Spec.Unschedulable, MIG: mig, MIGProfiles: profiles}
	if m.Pod == "" {
		m.Pod = "default"
	}
	if !nodeReady(n) {
		m.Health = model.HealthUnhealthy
	}
	return m, true
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	if q, ok := l[name]; ok {
		return q
	}
	return resource.Quantity{}
}

// nodeReady: a node with no Ready condition yet (created through the API,
// no kubelet) is taken as ready; one whose kubelet says otherwise is not.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}

// annInt reads an integer annotation; a malformed one is an error naming
// it, reported as the pod's pending reason.
func annInt(p *corev1.Pod, key string, def int) (int, error) {
	v, ok := p.Annotations[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("annotation %s: %q: expected an integer", key, v)
	}
	return n, nil
}

// parseGPUs reads AnnGPUs.
func parseGPUs(s string, gpus int) (model.GPUMask, error) {
	var m model.GPUMask
	for _, f := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 || i >= gpus {
			return 0, fmt.Errorf("annotation %s: %q: expected GPU indices below %d", AnnGPUs, s, gpus)
		}
		m |= model.GPUMask(1) << i
	}
	return m, nil
}

// formatGPUs writes a mask as AnnGPUs.
func formatGPUs(m model.GPUMask) string {
	var b strings.Builder
	for i := 0; i < 64; i++ {
		if m&(model.GPUMask(1)<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(i))
		}
	}
	return b.String()
}
