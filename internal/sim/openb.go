package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// NodesPerPodDefault groups trace nodes into pods when the trace says
// nothing of its network: 32 nodes per leaf switch, as in the design.
const NodesPerPodDefault = 32

// LoadNodes reads a node list (openb format: sn, cpu_milli, memory_mib,
// gpu, model). Nodes with no GPU are left out. The trace has no network
// layout, so consecutive nodes are grouped into pods of nodesPerPod.
func LoadNodes(path string, nodesPerPod int) ([]model.Node, error) {
	t, err := readTable(path, "sn", "cpu_milli", "memory_mib", "gpu", "model")
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

// LoadOpenB reads Alibaba's openb pod list against a node list. Mapping,
// stated in the report: LS (latency-sensitive) pods are inference, one
// replica alive from creation to deletion; every other QoS is training,
// running for deletion − scheduled (or − creation when never scheduled);
// BE pods are preemptible with an assumed 10 GB checkpoint, others are
// not; fractions of a GPU (gpu_milli < 1000) stay shares, and since the
// trace's cluster shares any GPU node, every node is then in the sharing
// pool; CPU-only pods are left out.
func LoadOpenB(podsPath, nodesPath string) (*Workload, error) {
	nodes, err := LoadNodes(nodesPath, NodesPerPodDefault)
	if err != nil {
		return nil, err
	}
	t, err := readTable(podsPath, "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "creation_time", "deletion_time", "scheduled_time")
	if err != nil {
		return nil, err
	}
	w := &Workload{Name: "openb", Nodes: nodes}
	cpuOnly, fractional := 0, 0
	for i := range t.rows {
		r := t.row(i)
		gpus, milli := r.int("num_gpu", 0), r.int("gpu_milli", 1000)
		cpu, mem := r.int("cpu_milli", 0), r.int("memory_mib", 0)
		created, deleted, scheduled := r.int("creation_time", 0), r.int("deletion_time", 0), r.int("scheduled_time", -1)
		if r.err != nil {
			return nil, r.err
		}
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
		if deleted < created {
			return nil, t.fail(i, "deletion_time", "%d is before creation_time %d", deleted, created)
		}
		start := created
		if scheduled >= 0 {
			start = scheduled
		}
		shape := model.Shape{GPUs: int(gpus), Topology: model.TopologyNode, CPUMilli: cpu, MemoryMiB: mem}
		if milli < 1000 {
			if gpus != 1 {
				return nil, t.fail(i, "gpu_milli", "%d: a fraction is of one GPU, and num_gpu is %d", milli, gpus)
			}
			shape.GPUMilli = int(milli)
		}
		if spec := t.get(i, "gpu_spec"); spec != "" {
			shape.Models = strings.Split(spec, "|")
		}
		sec := func(s int64) time.Duration { return time.Duration(s) * time.Second }
		switch qos := t.get(i, "qos"); qos {
		case "LS":
			w.Services = append(w.Services, ServiceSpec{ID: t.get(i, "name"), Shape: shape, Min: 0, Max: 1, Priority: 1000,
				Demand: []DemandPoint{{At: sec(created), Replicas: 1}, {At: sec(deleted), Replicas: 0}}})
		case "BE", "Burstable", "Guaranteed":
			j := JobSpec{ID: t.get(i, "name"), Submit: sec(created), Work: max(sec(deleted-start), time.Second), Shape: shape, Team: qos, Priority: 10}
			if qos == "BE" {
				j.Preemptible, j.CheckpointBytes, j.Priority = true, openbCheckpoint, 0
			}
			w.Jobs = append(w.Jobs, j)
		default:
			return nil, t.fail(i, "qos", "%q is not one of LS, BE, Burstable, Guaranteed", qos)
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
	return w, nil
}
