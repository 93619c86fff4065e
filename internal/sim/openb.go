package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// NodesPerPodDefault groups trace nodes into pods when the trace says
// nothing of its network: 32 nodes per leaf switch, as in the design.
const NodesPerPodDefault = 32

// openbNodeColumns are the node list's required columns; model is
// optional, and without it every node has no model: it takes any pod
// without gpu_spec and none pinned by one. That default is berth's: FGD's
// simulator reads its nodes from YAML (node_yaml/openb_node_list_gpu_node.yaml
// in alibaba/clusterdata cluster-trace-gpu-v2023, the model a node label)
// and ships no node CSV without the column; an empty model is how the
// published all-node list gives its CPU-only nodes.
var openbNodeColumns = []string{"sn", "cpu_milli", "memory_mib", "gpu"}

// LoadNodes reads a node list (openb format: sn, cpu_milli, memory_mib,
// gpu, model; model optional). Nodes with no GPU are left out. The trace
// has no network layout, so consecutive nodes are grouped into pods of
// nodesPerPod.
func LoadNodes(path string, nodesPerPod int) ([]model.Node, error) {
	t, err := readTable(path, openbNodeColumns...)
	if err != nil {
		return nil, err
	}
	var out []model.Node
	for i := range t.rows {
		r := t.row(i)
		gpus, cpu, mem := r.int("gpu", 0), r.int("cpu_milli", 0), r.int("memory_mib", 0)
		if r.err != nil {
			return nil, r.err
		}
		if gpus == 0 {
			continue
		}
		if gpus < 0 || gpus > model.MaxGPUsPerNode {
			return nil, t.fail(i, "gpu", "%d is not between 0 and %d", gpus, model.MaxGPUsPerNode)
		}
		id := t.get(i, "sn")
		if id == "" {
			return nil, t.fail(i, "sn", "must not be empty")
		}
		out = append(out, model.Node{ID: id, Pod: fmt.Sprintf("pod-%03d", len(out)/nodesPerPod), Model: t.get(i, "model"),
			GPUs: int(gpus), CPUMilli: cpu, MemoryMiB: mem, Health: model.HealthHealthy, BootEpoch: 1})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no node with a GPU", path)
	}
	return out, nil
}

// openbCheckpoint is the state assumed for best-effort openb jobs, which
// the trace does not describe.
const openbCheckpoint = 10e9

// openbPodColumns are the pod list's required columns, "|" between
// alternatives. FGD's simulator reads pods from YAML that
// pod_csv_to_yaml.py writes from the CSV (alibaba/clusterdata
// cluster-trace-gpu-v2023/pod_csv_to_yaml.py, run by prepare_input.sh;
// the same in hkust-adsl/kubernetes-scheduler-simulator's data/), and
// that script needs only these: a name (or a job_id, named job-%04d), a
// CPU request (cpu_milli, or cpu in cores) and num_gpu. FGD's own trace
// variants leave the rest out (openb_pod_list_multigpu50.csv has only
// name, cpu_milli, memory_mib, num_gpu, gpu_milli;
// openb_pod_list_nomem.csv has no memory_mib), and the script's defaults
// for them are:
//
//   - memory_mib: no memory request (it writes one only from the column);
//   - gpu_milli: 1000, whole GPUs (its default when the column is absent);
//   - gpu_spec: any GPU model (it writes no model constraint).
//
// It reads neither QoS, phase nor times (the creation and deletion
// annotations are commented out), so those defaults are LoadOpenB's. A
// column that is present is read and checked as ever.
var openbPodColumns = []string{"name|job_id", "cpu_milli|cpu", "num_gpu"}

// openbPod is what both openb loaders read from a pod row.
type openbPod struct {
	name        string
	cpu, mem    int64
	gpus, milli int64
	models      []string
}

// readOpenBPod reads pod row i with FGD's defaults for absent columns;
// emptyMilli is gpu_milli for an empty field of a present column.
func readOpenBPod(t *table, i int, emptyMilli int64) (openbPod, error) {
	r := t.row(i)
	p := openbPod{milli: 1000}
	if t.has("cpu_milli") {
		p.cpu = r.int("cpu_milli", 0)
	} else if s := t.get(i, "cpu"); s != "" {
		// cores; the script writes "%dm" % (cpu * 1000), which truncates
		cores, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(cores) || math.IsInf(cores, 0) {
			return p, t.fail(i, "cpu", "%q is not a number of cores", s)
		}
		p.cpu = int64(cores * 1000)
	}
	p.mem, p.gpus = r.int("memory_mib", 0), r.int("num_gpu", 0)
	if t.has("gpu_milli") {
		p.milli = r.int("gpu_milli", emptyMilli)
	}
	if r.err != nil {
		return p, r.err
	}
	if t.has("name") {
		p.name = t.get(i, "name")
	} else {
		id, err := t.int(i, "job_id", 0)
		if err != nil {
			return p, err
		}
		if t.get(i, "job_id") == "" {
			return p, t.fail(i, "job_id", "must not be empty")
		}
		p.name = fmt.Sprintf("job-%04d", id)
	}
	for _, m := range strings.Split(t.get(i, "gpu_spec"), "|") {
		if m = strings.TrimSpace(m); m != "" {
			p.models = append(p.models, m)
		}
	}
	return p, nil
}

// openbOpenTail is how long a replay of a pod list without deletion_time
// runs on after the last creation: nothing is ever deleted, so the trace
// names no end, and a day is berth's choice (--days shortens it).
const openbOpenTail = 24 * time.Hour

// LoadOpenB reads Alibaba's openb pod list against a node list. Mapping,
// stated in the report: LS (latency-sensitive) pods are inference, one
// replica alive from creation to deletion; every other QoS is training,
// running for deletion − scheduled (or − creation when never scheduled);
// BE pods are preemptible with an assumed 10 GB checkpoint, others are
// not; fractions of a GPU (gpu_milli < 1000) stay shares, and since the
// trace's cluster shares any GPU node, every node is then in the sharing
// pool; CPU-only pods are left out.
//
// Columns FGD's variants leave out (openbPodColumns has the required
// ones and FGD's defaults) take these defaults, which FGD's simulator
// gives or implies, since it replays no time at all:
//
//   - creation_time: 0, every pod created at once in file order (FGD
//     submits the whole list at the start, in order);
//   - scheduled_time: never scheduled, so training runs from creation;
//   - deletion_time: never deleted (FGD deletes no pod): an LS replica
//     stays, a training pod runs past the end, and the replay ends
//     openbOpenTail after the last creation;
//   - qos: Guaranteed, the class Kubernetes gives the pods FGD's script
//     writes (limits equal to requests), or Burstable when memory_mib is
//     absent too (a CPU request alone); training either way, not
//     preemptible.
func LoadOpenB(podsPath, nodesPath string) (*Workload, error) {
	nodes, err := LoadNodes(nodesPath, NodesPerPodDefault)
	if err != nil {
		return nil, err
	}
	t, err := readTable(podsPath, openbPodColumns...)
	if err != nil {
		return nil, err
	}
	open := !t.has("deletion_time")
	qosDefault := "Guaranteed"
	if !t.has("memory_mib") {
		qosDefault = "Burstable"
	}
	w := &Workload{Name: "openb", Nodes: nodes}
	cpuOnly, fractional := 0, 0
	var latest int64   // the last creation or scheduling of a pod kept
	var openJobs []int // indexes in w.Jobs of training pods never deleted
	sec := func(s int64) time.Duration { return time.Duration(s) * time.Second }
	for i := range t.rows {
		p, err := readOpenBPod(t, i, 1000)
		if err != nil {
			return nil, err
		}
		r := t.row(i)
		created, scheduled := r.int("creation_time", 0), r.int("scheduled_time", -1)
		deleted := int64(0)
		if !open {
			deleted = r.int("deletion_time", 0)
		}
		if r.err != nil {
			return nil, r.err
		}
		gpus, milli := p.gpus, p.milli
		if gpus == 0 {
			cpuOnly++
			continue
		}
		if gpus < 0 {
			return nil, t.fail(i, "num_gpu", "%d must not be negative", gpus)
		}
		if milli < 1 || milli > 1000 {
			return nil, t.fail(i, "gpu_milli", "%d is not between 1 and 1000", milli)
		}
		if milli < 1000 {
			fractional++
		}
		if !open && deleted < created {
			return nil, t.fail(i, "deletion_time", "%d is before creation_time %d", deleted, created)
		}
		start := created
		if scheduled >= 0 {
			start = scheduled
		}
		latest = max(latest, created, start)
		shape := model.Shape{GPUs: int(gpus), Topology: model.TopologyNode, CPUMilli: p.cpu, MemoryMiB: p.mem, Models: p.models}
		if milli < 1000 {
			if gpus != 1 {
				return nil, t.fail(i, "gpu_milli", "%d: a fraction is of one GPU, and num_gpu is %d", milli, gpus)
			}
			shape.GPUMilli = int(milli)
		}
		qos := qosDefault
		if t.has("qos") {
			qos = t.get(i, "qos")
		}
		switch qos {
		case "LS":
			demand := []DemandPoint{{At: sec(created), Replicas: 1}}
			if !open {
				demand = append(demand, DemandPoint{At: sec(deleted), Replicas: 0})
			}
			w.Services = append(w.Services, ServiceSpec{ID: p.name, Shape: shape, Min: 0, Max: 1, Priority: 1000, Demand: demand})
		case "BE", "Burstable", "Guaranteed":
			j := JobSpec{ID: p.name, Submit: sec(created), Shape: shape, Team: qos, Priority: 10}
			if open {
				openJobs = append(openJobs, len(w.Jobs))
			} else {
				j.Work = max(sec(deleted-start), time.Second)
			}
			if qos == "BE" {
				j.Preemptible, j.CheckpointBytes, j.Priority = true, openbCheckpoint, 0
			}
			w.Jobs = append(w.Jobs, j)
		default:
			return nil, t.fail(i, "qos", "%q is not one of LS, BE, Burstable, Guaranteed", qos)
		}
	}
	if open {
		// Still running when the replay ends: a second past the horizon
		// even for a job placed the moment it is created.
		w.Horizon = sec(latest) + openbOpenTail
		for _, k := range openJobs {
			w.Jobs[k].Work = w.Horizon - w.Jobs[k].Submit + time.Second
		}
	}
	sortJobs(w.Jobs)
	if fractional > 0 {
		sharing := sched.Pools{}
		for i := range w.Nodes {
			w.Nodes[i].Pool = sharing.SharingPool()
		}
	}
	w.Notes = append(w.Notes,
		"openb mapping (an assumption): LS pods are inference (one replica from creation to deletion); BE, Burstable and Guaranteed pods are training.",
		"openb BE pods are preemptible with an assumed 10 GB checkpoint; other training pods are not preemptible.",
		fmt.Sprintf("%d pods asked for a fraction of a GPU (gpu_milli < 1000). berth places them as shares, every node being in the sharing pool as every node of the trace's cluster shares; the baselines have no sharing and give each a whole GPU.", fractional),
		fmt.Sprintf("%d CPU-only pods were left out; the trace has no network layout, so nodes were grouped into pods of %d in file order.", cpuOnly, NodesPerPodDefault))
	if absent := openbDefaults(t, qosDefault); len(absent) > 0 {
		w.Notes = append(w.Notes, "openb columns absent from the pod list, read with FGD's defaults: "+strings.Join(absent, "; ")+".")
	}
	if open {
		w.Notes = append(w.Notes, fmt.Sprintf("the pod list has no deletion_time and FGD's simulator deletes no pod: LS replicas stay, training pods run past the end, and the replay ends %s after the last creation.", openbOpenTail))
	}
	return w, nil
}

// openbDefaults lists the optional pod columns t lacks, each with the
// default LoadOpenB gives it.
func openbDefaults(t *table, qos string) []string {
	var out []string
	for _, c := range []struct{ col, def string }{
		{"memory_mib", "no memory request"},
		{"gpu_milli", "1000, whole GPUs"},
		{"gpu_spec", "any GPU model"},
		{"qos", qos + ", training"},
		{"creation_time", "every pod created at 0, in file order"},
		{"scheduled_time", "training runs from creation"},
		{"deletion_time", "never deleted"},
	} {
		if !t.has(c.col) {
			out = append(out, c.col+" ("+c.def+")")
		}
	}
	return out
}
