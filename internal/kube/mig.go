package kube

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berthsched/berth/internal/model"
)

// MIG under Kubernetes. NVIDIA's device plugin with the mixed strategy
// advertises each MIG profile as its own resource, nvidia.com/mig-3g.40gb,
// counted per node, and nvidia.com/gpu counts only the GPUs not in MIG
// mode; a pod asks for one profile and the kubelet hands it a device of
// exactly that profile. The Node does not say which physical GPU an
// instance is on, so berth lays the instances out itself, packed onto
// GPUs of seven slices after the node's whole GPUs. Which slot berth
// counts a pod against is bookkeeping: what must hold, and does, is that
// berth never binds more pods of a profile to a node than it has
// instances of that profile. (With the single strategy every instance is
// an nvidia.com/gpu and berth sees a node of that many small GPUs.)

// ResourceMIGPrefix starts the name of a MIG profile's resource.
const ResourceMIGPrefix = "nvidia.com/mig-"

// AnnMIGInstance is the MIG instance (from 1, in berth's layout of the
// node) berth counted a MIG pod against; AnnGPUs names its GPU there.
const AnnMIGInstance = "berth.dev/mig-instance"

// migSlices is the compute slices of a full GPU (A100, H100, H200).
const migSlices = 7

// profileSlices is a profile's GPU-instance slices: 3 for 3g.40gb,
// 1g.10gb+me and 1c.3g.40gb (a compute instance of a 3g).
func profileSlices(p string) (int, error) {
	for _, f := range strings.Split(p, ".") {
		if n, ok := strings.CutSuffix(f, "g"); ok {
			if k, err := strconv.Atoi(n); err == nil && k >= 1 && k <= migSlices {
				return k, nil
			}
		}
	}
	return 0, fmt.Errorf("%s%s: expected a MIG profile such as 3g.40gb (1 to %d slices)", ResourceMIGPrefix, p, migSlices)
}

// instanceMilli is an instance's size in berth's units; a request's is
// capped at 999 (a 7g instance is the whole GPU, and a share is less).
func instanceMilli(slices int) int { return slices * 1000 / migSlices }

// nodeMIG is a Node's MIG instances by profile, from its capacity.
func nodeMIG(n *corev1.Node) map[string]int {
	out := map[string]int{}
	for name, q := range n.Status.Capacity {
		if p, ok := strings.CutPrefix(string(name), ResourceMIGPrefix); ok && q.Value() > 0 {
			if _, err := profileSlices(p); err == nil {
				out[p] = int(min(q.Value(), model.MaxGPUsPerNode*migSlices))
			}
		}
	}
	return out
}

// migLayout packs a node's instances onto GPUs: largest first, each on
// the first GPU with the slices left, a new GPU when none has. The result
// is deterministic (profiles of one size in name order), so a pod's slot
// means the same thing at every pass while the node's capacity stands.
func migLayout(profiles map[string]int) ([][]int, [][]string) {
	type inst struct {
		name   string
		slices int
	}
	var all []inst
	for p, n := range profiles {
		k, _ := profileSlices(p)
		for range n {
			all = append(all, inst{p, k})
		}
	}
	slices.SortStableFunc(all, func(a, b inst) int {
		if a.slices != b.slices {
			return b.slices - a.slices
		}
		return strings.Compare(a.name, b.name)
	})
	var mig [][]int
	var names [][]string
	var left []int
	for _, in := range all {
		g := slices.IndexFunc(left, func(l int) bool { return l >= in.slices })
		if g < 0 {
			g = len(left)
			left, mig, names = append(left, migSlices), append(mig, nil), append(names, nil)
		}
		left[g] -= in.slices
		mig[g] = append(mig[g], instanceMilli(in.slices))
		names[g] = append(names[g], in.name)
	}
	return mig, names
}

// podMIG is the MIG profile a pod asks for, "" for none. A pod asks for
// one instance of one profile and no whole GPUs: that is what the device
// plugin can serve, and what berth places.
func podMIG(p *corev1.Pod) (string, error) {
	asked := podMIGAsk(p)
	if len(asked) == 0 {
		return "", nil
	}
	var profs []string
	for prof := range asked {
		profs = append(profs, prof)
	}
	slices.Sort(profs)
	prof := profs[0]
	switch {
	case len(profs) > 1:
		return "", fmt.Errorf("resources: asks for MIG profiles %s: berth places one MIG instance per pod", strings.Join(profs, " and "))
	case asked[prof] > 1:
		return "", fmt.Errorf("resources: %s%s: %d: berth places one MIG instance per pod (run %d pods)", ResourceMIGPrefix, prof, asked[prof], asked[prof])
	case podGPUs(p) > 0:
		return "", fmt.Errorf("resources: asks for %s and %s%s: a pod gets whole GPUs or one MIG instance, not both", ResourceGPU, ResourceMIGPrefix, prof)
	}
	if _, err := profileSlices(prof); err != nil {
		return "", fmt.Errorf("resources: %w", err)
	}
	return prof, nil
}

// podMIGAsk is the MIG instances a pod holds, by profile, as the kubelet
// counts them: the containers' sum, or the largest init container's
// where that is more (init containers run one at a time, before the
// rest). Requests stand in for limits where a container sets only them.
func podMIGAsk(p *corev1.Pod) map[string]int64 {
	// Every pod of every pass comes here and almost none asks for MIG:
	// nothing is allocated until a MIG resource is seen.
	var asked map[string]int64
	each := func(c *corev1.Container, f func(prof string, n int64)) {
		rl := c.Resources.Limits
		for name, q := range c.Resources.Requests {
			if _, ok := rl[name]; !ok {
				if prof, ok := strings.CutPrefix(string(name), ResourceMIGPrefix); ok && q.Value() > 0 {
					f(prof, q.Value())
				}
			}
		}
		for name, q := range rl {
			if prof, ok := strings.CutPrefix(string(name), ResourceMIGPrefix); ok && q.Value() > 0 {
				f(prof, q.Value())
			}
		}
	}
	put := func(prof string, n int64, combine func(a, b int64) int64) {
		if asked == nil {
			asked = map[string]int64{}
		}
		asked[prof] = combine(asked[prof], n)
	}
	sum := func(a, b int64) int64 { return a + b }
	for i := range p.Spec.Containers {
		each(&p.Spec.Containers[i], func(prof string, n int64) { put(prof, n, sum) })
	}
	for i := range p.Spec.InitContainers {
		var one map[string]int64
		each(&p.Spec.InitContainers[i], func(prof string, n int64) {
			if one == nil {
				one = map[string]int64{}
			}
			one[prof] += n
		})
		for prof, n := range one {
			put(prof, n, func(a, b int64) int64 { return max(a, b) })
		}
	}
	return asked
}

// migShape is the shape of a pod asking for MIG profile prof.
func migShape(prof string) model.Shape {
	k, _ := profileSlices(prof)
	return model.Shape{GPUs: 1, Topology: model.TopologyNode, GPUMilli: min(instanceMilli(k), 999), MIGProfile: prof}
}

// migSlot finds the slot (GPU, instance from 1) a bound MIG pod of
// profile prof holds on node n: its annotations when they name a slot of
// that profile not taken, else the first free slot of the profile; ok is
// false when the node has none left (it was repartitioned under running
// pods, or another scheduler overbooked it).
func migSlot(n *model.Node, p *corev1.Pod, prof string, taken map[[2]int]bool) (g, inst int, ok bool) {
	free := func(g, k int) bool {
		return n.Partitioned(g) && k >= 1 && k <= len(n.MIG[g]) && n.MIGProfile(g, k-1) == prof && !taken[[2]int{g, k}]
	}
	if m, err := parseGPUs(p.Annotations[AnnGPUs], n.GPUs); err == nil && m.Count() == 1 {
		g = m.Indices()[0]
		if k, err := strconv.Atoi(p.Annotations[AnnMIGInstance]); err == nil && free(g, k) {
			return g, k, true
		}
	}
	for g := range n.MIG {
		for k := 1; k <= len(n.MIG[g]); k++ {
			if free(g, k) {
				return g, k, true
			}
		}
	}
	return 0, 0, false
}
