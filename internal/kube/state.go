package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// world is one consistent read of the API server as berth sees it: the
// sched.State, and how its owners map back to pods.
type world struct {
	state sched.State
	// groups are berth's work, by owner id (a job id or a deployment id).
	groups map[string]*group
	// invalid are berth pods that cannot be scheduled as written, with why.
	invalid map[string]string
	// pods are every pod read, by key.
	pods map[string]*corev1.Pod
	// orgs is each labelled namespace's org (quota.go).
	orgs map[string]string
	// members are the pods of an allocation that stands for several (a
	// job's pods on one node), by allocation id; an allocation not in it
	// is the pod its id names.
	members map[string][]*corev1.Pod
}

// podsOf are the pods behind an allocation.
func (w *world) podsOf(id string) []*corev1.Pod {
	if m, ok := w.members[id]; ok {
		return m
	}
	if p := w.pods[id]; p != nil {
		return []*corev1.Pod{p}
	}
	return nil
}

// group is the pods of one job (a pod group or a single pod) or of one
// inference deployment.
type group struct {
	id     string
	kind   model.OwnerKind
	pods   []*corev1.Pod // by name
	perPod int           // GPUs each pod asks for
	// missing is set for a pod group not all of whose pods exist yet.
	missing string
	// profile is the MIG profile each pod asks for one instance of, ""
	// for whole GPUs; perPod is then 1 (the GPU the instance is on).
	profile string
}

// unbound is the group's pods not yet on a node, by name.
func (g *group) unbound() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range g.pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// byKey orders pods by namespace, then name, without building their keys
// (a sort of every bound pod calls it n log n times a pass). Within one
// namespace it is the keys' order.
func byKey(a, b *corev1.Pod) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// ownerOf says whose work a berth pod is: its kind and owner id.
func ownerOf(p *corev1.Pod) (model.OwnerKind, string, error) {
	kind := p.Annotations[AnnKind]
	var rs string
	for _, o := range p.OwnerReferences {
		if o.Kind == "ReplicaSet" || o.Kind == "StatefulSet" {
			rs = o.Name
		}
	}
	if d := p.Annotations[AnnDeployment]; d != "" {
		rs = d
	}
	switch {
	case kind == "inference" || kind == "" && rs != "":
		if rs == "" {
			rs = p.Name
		}
		return model.OwnerInference, p.Namespace + "/" + rs, nil
	case kind == "training" || kind == "":
		if g := p.Annotations[AnnGroup]; g != "" {
			return model.OwnerTraining, p.Namespace + "/" + g, nil
		}
		return model.OwnerTraining, p.Namespace + "/" + p.Name, nil
	}
	return "", "", fmt.Errorf("annotation %s: %q: expected training or inference", AnnKind, kind)
}

// read builds the world from Nodes and Pods. schedulerName picks berth's
// pods; every bound pod with GPUs is an allocation whoever placed it.
func read(nodes []*corev1.Node, pods []*corev1.Pod, orgs map[string]string, schedulerName, podLabel string, kept keptState, cfg sched.Config, quotas []model.Quota) *world {
	w := &world{groups: make(map[string]*group, len(pods)), invalid: map[string]string{}, pods: make(map[string]*corev1.Pod, len(pods)),
		members: map[string][]*corev1.Pod{}, orgs: orgs}
	s := &w.state
	size := map[string]int{} // a node's whole GPUs (its MIG GPUs come after)
	for _, node := range nodes {
		if n, ok := nodeOf(node, podLabel, cfg.Pools.SharingPool()); ok {
			s.Nodes = append(s.Nodes, n)
		}
	}
	slices.SortFunc(s.Nodes, func(a, b model.Node) int { return strings.Compare(a.ID, b.ID) })
	byID := map[string]*model.Node{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		byID[n.ID] = n
		size[n.ID] = n.GPUs
		for g := range n.GPUs {
			if n.Partitioned(g) {
				size[n.ID] = g
				break
			}
		}
	}
	used := map[string]model.GPUMask{}
	s.Allocations = make([]model.Allocation, 0, len(pods)/4)
	var unmasked, mine, migPods []*corev1.Pod
	masks := map[string]model.GPUMask{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		w.pods[key(p)] = p
		ours := p.Spec.SchedulerName == schedulerName
		if ours {
			w.addWork(p)
		}
		if p.Spec.NodeName == "" || byID[p.Spec.NodeName] == nil {
			continue
		}
		// Every MIG instance a bound pod holds is taken, whoever bound it
		// and whatever berth would have refused in its own pods (two
		// instances, MIG beside whole GPUs); another scheduler's pod
		// holding whole GPUs too is counted below as well.
		if len(podMIGAsk(p)) > 0 {
			migPods = append(migPods, p)
			if ours {
				continue
			}
		}
		if podGPUs(p) == 0 || size[p.Spec.NodeName] == 0 {
			continue
		}
		m, err := parseGPUs(p.Annotations[AnnGPUs], size[p.Spec.NodeName])
		if !ours || err != nil {
			unmasked = append(unmasked, p)
			continue
		}
		used[p.Spec.NodeName] |= m
		mine = append(mine, p)
		masks[key(p)] = m
	}
	w.mergeJobs(mine, masks)
	// Pods another scheduler bound name no GPUs: the device plugin chose
	// them. They take the lowest indices berth has not given out, which
	// keeps the count right; berth never moves them.
	for _, p := range unmasked {
		n := p.Spec.NodeName
		var m model.GPUMask
		for g := 0; g < size[n] && m.Count() < int(podGPUs(p)); g++ {
			if !used[n].Has(g) {
				m |= model.GPUMask(1) << g
			}
		}
		used[n] |= m
		s.Allocations = append(s.Allocations, allocationOf(p, m))
	}
	w.addMIGPods(migPods, byID, schedulerName)
	slices.SortFunc(s.Allocations, func(a, b model.Allocation) int { return strings.Compare(a.ID, b.ID) })
	w.buildWork()
	s.Reservations = kept.Reservations
	s.RecentPreemptions = kept.Preemptions
	s.Config = cfg
	s.Quotas = quotas
	sched.MarkBorrowed(s) // the pods do not say which work borrowed
	return w
}

// mergeJobs turns berth's bound pods into allocations: one per pod, except
// that a job's pods on one node are one allocation, as the core made it
// (a part of a placement), so that what the core reads is what it wrote.
// Read as one allocation per pod, six 1-GPU pods of a 6-GPU part looked
// like six 1-GPU tenants, and the next 1-GPU job went there as
// "shape-aligned" where the server and the simulator would not put it.
// The merged allocation's id is its first pod's key.
func (w *world) mergeJobs(pods []*corev1.Pod, masks map[string]model.GPUMask) {
	s := &w.state
	type part struct{ owner, node string }
	at := map[part]int{}
	slices.SortFunc(pods, byKey)
	for _, p := range pods {
		a := allocationOf(p, masks[key(p)])
		pt := part{a.OwnerID, a.NodeID}
		if a.OwnerKind == model.OwnerInference || strings.HasPrefix(a.OwnerID, "pod:") {
			s.Allocations = append(s.Allocations, a)
			continue
		}
		i, ok := at[pt]
		if !ok {
			at[pt] = len(s.Allocations)
			s.Allocations = append(s.Allocations, a)
			w.members[a.ID] = []*corev1.Pod{p}
			continue
		}
		m := &s.Allocations[i]
		m.GPUs |= a.GPUs
		m.CPUMilli += a.CPUMilli
		m.MemoryMiB += a.MemoryMiB
		if a.CreatedAt.Before(m.CreatedAt) {
			m.CreatedAt = a.CreatedAt
		}
		if a.Stopping && !m.Stopping {
			m.Stopping, m.StopReason, m.StopDeadline = true, a.StopReason, a.StopDeadline
		}
		w.members[m.ID] = append(w.members[m.ID], p)
	}
}

// allocationOf is a bound pod's allocation; its id is the pod's key.
func allocationOf(p *corev1.Pod, m model.GPUMask) model.Allocation {
	cpu, mem := podRequests(p)
	a := model.Allocation{ID: key(p), NodeID: p.Spec.NodeName, GPUs: m, CPUMilli: cpu, MemoryMiB: mem,
		CreatedAt: p.CreationTimestamp.Time}
	if t, err := time.Parse(time.RFC3339, p.Annotations[AnnBoundAt]); err == nil {
		a.CreatedAt = t
	}
	kind, owner, err := ownerOf(p)
	if err != nil || p.Annotations[AnnGPUs] == "" {
		// Not berth's to preempt: training with no job behind it is
		// never a victim.
		kind, owner = model.OwnerTraining, "pod:"+key(p)
	}
	a.OwnerKind, a.OwnerID = kind, owner
	if kind == model.OwnerInference {
		a.Replica, _ = annInt(p, AnnReplica, 0)
	} else if owner[:4] != "pod:" {
		a.Preemptible = p.Annotations[AnnPreemptible] == "true"
		if r := p.Annotations[AnnBackfill]; r != "" {
			a.OwnerKind, a.Reservation = model.OwnerBackfill, r
		}
	}
	if p.DeletionTimestamp != nil {
		a.Stopping, a.StopReason = true, "preempted"
		a.StopDeadline = p.DeletionTimestamp.Time
	}
	return a
}

// addMIGPods makes the bound MIG pods allocations, each of its profile's
// slot on its node: first the pods berth bound, on the slots their
// annotations name, then the others on the first free slots.
func (w *world) addMIGPods(pods []*corev1.Pod, nodes map[string]*model.Node, schedulerName string) {
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		ra, rb := a.Spec.SchedulerName == schedulerName && a.Annotations[AnnMIGInstance] != "", b.Spec.SchedulerName == schedulerName && b.Annotations[AnnMIGInstance] != ""
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return byKey(a, b)
	})
	taken := map[string]map[[2]int]bool{}
	for _, p := range pods {
		n := nodes[p.Spec.NodeName]
		if taken[n.ID] == nil {
			taken[n.ID] = map[[2]int]bool{}
		}
		asked := podMIGAsk(p)
		profs := slices.Sorted(maps.Keys(asked))
		k := 0
		for _, prof := range profs {
			// A node has at most MaxGPUsPerNode*7 instances: a larger count
			// is a pod the kubelet will never run, and holds what exists.
			for range min(asked[prof], model.MaxGPUsPerNode*migSlices) {
				g, inst, ok := migSlot(n, p, prof, taken[n.ID])
				if !ok {
					break
				}
				taken[n.ID][[2]int{g, inst}] = true
				a := allocationOf(p, model.MaskOf(g))
				if k > 0 { // a pod of another scheduler's holding several instances
					a.ID = fmt.Sprintf("%s#%d", a.ID, k)
				}
				k++
				if p.Spec.SchedulerName != schedulerName {
					a.OwnerKind, a.OwnerID, a.Preemptible = model.OwnerTraining, "pod:"+key(p), false
				}
				a.GPUMilli, a.MIGInstance = migShape(prof).GPUMilli, inst
				w.state.Allocations = append(w.state.Allocations, a)
			}
		}
	}
}

// addWork files a berth pod under its owner.
func (w *world) addWork(p *corev1.Pod) {
	kind, owner, err := ownerOf(p)
	prof, perr := podMIG(p)
	if err == nil {
		err = perr
	}
	if err == nil && prof == "" && podGPUs(p) < 1 {
		err = fmt.Errorf("resources: the pod asks for no %s and no %s<profile>; berth schedules GPU pods only", ResourceGPU, ResourceMIGPrefix)
	}
	if err != nil {
		w.invalid[key(p)] = err.Error()
		return
	}
	g := w.groups[owner]
	if g == nil {
		g = &group{id: owner, kind: kind, profile: prof}
		w.groups[owner] = g
	}
	g.pods = append(g.pods, p)
}

// podAsk is what a pod asks for, as a group compares its pods: whole
// GPUs, or one instance of a MIG profile. It is compared, not printed,
// on every pod of every pass, so it is a value and not a string.
type podAsk struct {
	gpus    int64
	profile string
}

func ask(p *corev1.Pod) podAsk {
	if prof, _ := podMIG(p); prof != "" {
		return podAsk{profile: prof}
	}
	return podAsk{gpus: podGPUs(p)}
}

func (a podAsk) String() string {
	if a.profile != "" {
		return "one " + ResourceMIGPrefix + a.profile
	}
	return fmt.Sprintf("%d GPUs", a.gpus)
}

// buildWork turns groups into jobs and deployments. A group whose pods
// disagree, or whose annotations are malformed, is not scheduled: each of
// its pods says why.
func (w *world) buildWork() {
	ids := make([]string, 0, len(w.groups))
	for id := range w.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g := w.groups[id]
		slices.SortFunc(g.pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		var err error
		if g.kind == model.OwnerInference {
			err = w.addDeployment(g)
		} else {
			err = w.addJob(g)
		}
		if err != nil {
			for _, p := range g.pods {
				w.invalid[key(p)] = err.Error()
			}
			delete(w.groups, id)
		}
	}
}

func (w *world) addJob(g *group) error {
	first := g.pods[0]
	g.perPod = max(int(podGPUs(first)), 1)
	j := &model.Job{ID: g.id, Name: first.Annotations[AnnGroup], State: model.JobPending,
		SubmittedAt: first.CreationTimestamp.Time}
	if j.Name == "" {
		j.Name = first.Name
	}
	org, err := w.orgOf(first.Namespace)
	if err != nil {
		return err
	}
	j.Org, j.Team = org, first.Namespace
	want0 := ask(first)
	for _, p := range g.pods {
		if ask(p) != want0 {
			return fmt.Errorf("group %s: pod %s asks for %s and %s for %s: every pod of a group must ask for the same", g.id, first.Name, want0, p.Name, ask(p))
		}
		if p.CreationTimestamp.Time.Before(j.SubmittedAt) {
			j.SubmittedAt = p.CreationTimestamp.Time
		}
		cpu, mem := podRequests(p)
		j.Shape.CPUMilli += cpu
		j.Shape.MemoryMiB += mem
		if p.Spec.NodeName != "" {
			j.State = model.JobRunning
			t, err := time.Parse(time.RFC3339, p.Annotations[AnnBoundAt])
			if err != nil {
				t = p.CreationTimestamp.Time
			}
			if j.StartedAt.IsZero() || t.Before(j.StartedAt) {
				j.StartedAt = t
			}
		}
	}
	want, err := annInt(first, AnnGroupSize, len(g.pods))
	if err != nil {
		return err
	}
	if want < 1 {
		return fmt.Errorf("annotation %s: %d: expected at least 1", AnnGroupSize, want)
	}
	if len(g.pods) < want && j.State == model.JobPending {
		g.missing = fmt.Sprintf("pod group %s has %d of its %d pods; it is placed once all exist", g.id, len(g.pods), want)
		return nil
	}
	top := model.TopologyNode
	if want > 1 {
		top = model.TopologyPod
	}
	if v, ok := first.Annotations[AnnTopology]; ok {
		if top, err = model.ParseTopology(v); err != nil {
			return fmt.Errorf("annotation %s: %w", AnnTopology, err)
		}
	}
	// A pod's GPUs are on one node: the core hands out parts in whole
	// pods' worth.
	j.Shape.GPUs, j.Shape.Topology, j.Shape.Worker = g.perPod*want, top, g.perPod
	if g.profile != "" {
		if want > 1 {
			return fmt.Errorf("group %s: %d pods asking for %s%s: berth places MIG pods one at a time, not as a pod group", g.id, want, ResourceMIGPrefix, g.profile)
		}
		sh := migShape(g.profile)
		j.Shape.GPUs, j.Shape.Topology, j.Shape.Worker, j.Shape.GPUMilli, j.Shape.MIGProfile = sh.GPUs, sh.Topology, 0, sh.GPUMilli, sh.MIGProfile
	}
	if m := first.Labels[LabelGPUProduct]; m != "" {
		j.Shape.Models = []string{m}
	}
	if j.Priority, err = priorityOf(first); err != nil {
		return err
	}
	// activeDeadlineSeconds is a declared runtime the kubelet enforces:
	// what backfill needs to know a job ends before a hold is due.
	if d := first.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
		j.MaxRuntime = time.Duration(*d) * time.Second
	}
	if first.Annotations[AnnPreemptible] == "true" {
		if first.Annotations[AnnCheckpoint] == "" {
			return fmt.Errorf("annotation %s: a preemptible pod must say where it checkpoints (and %s, its size in bytes, from which the eviction's grace period is set)", AnnCheckpoint, AnnCheckpointBytes)
		}
		j.Preemptible = true
		bytes, err := annInt(first, AnnCheckpointBytes, 0)
		if err != nil {
			return err
		}
		j.Checkpoint = &model.Checkpoint{Path: first.Annotations[AnnCheckpoint], SizeBytes: int64(bytes)}
	}
	if err := j.Validate(); err != nil {
		return fmt.Errorf("group %s: %w", g.id, err)
	}
	w.state.Jobs = append(w.state.Jobs, j)
	return nil
}

func (w *world) addDeployment(g *group) error {
	first := g.pods[0]
	g.perPod = max(int(podGPUs(first)), 1)
	d := model.Deployment{ID: g.id, Desired: len(g.pods), MaxReplicas: len(g.pods),
		ReplicaShape: model.Shape{GPUs: g.perPod, Topology: model.TopologyNode}, CreatedAt: first.CreationTimestamp.Time}
	if g.profile != "" {
		d.ReplicaShape = migShape(g.profile)
	}
	d.ReplicaShape.CPUMilli, d.ReplicaShape.MemoryMiB = podRequests(first)
	if m := first.Labels[LabelGPUProduct]; m != "" {
		d.ReplicaShape.Models = []string{m}
	}
	var err error
	if d.MinReplicas, err = annInt(first, AnnMinReplicas, 0); err != nil {
		return err
	}
	d.MinReplicas = min(d.MinReplicas, d.Desired)
	if d.Priority, err = priorityOf(first); err != nil {
		return err
	}
	for _, p := range g.pods {
		if ask(p) != ask(first) {
			return fmt.Errorf("deployment %s: replicas %s and %s ask for %s and %s: every replica must ask for the same", g.id, first.Name, p.Name, ask(first), ask(p))
		}
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("deployment %s: %w", g.id, err)
	}
	w.state.Deployments = append(w.state.Deployments, d)
	return nil
}

func priorityOf(p *corev1.Pod) (int, error) {
	def := 0
	if p.Spec.Priority != nil {
		def = int(*p.Spec.Priority)
	}
	return annInt(p, AnnPriority, def)
}
