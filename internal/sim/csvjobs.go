package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berthsched/berth/internal/model"
)

// CSVColumns documents the generic job-list format, for `berth sim`'s help.
const CSVColumns = `Generic job list (one row per job, header row required):
  submit      when it arrives: seconds from the start, or a duration (90m)
  duration    how long it runs on well-placed GPUs: seconds or a duration
  gpus        GPUs it needs (a whole number ≥ 1)
  topology    node | pod | any
  kind        training | inference (an inference row is one replica alive
              from submit for duration)
  team        free text (quota scope and grouping in the report)
  priority    a whole number; higher goes first
  model       acceptable GPU models separated by |, or empty for any
Optional: id, preemptible (true/false), checkpoint_gb, max_runtime.`

// LoadCSV reads a generic job list (see CSVColumns) for the given nodes.
func LoadCSV(path string, nodes []model.Node) (*Workload, error) {
	t, err := readTable(path, "submit", "duration", "gpus", "topology", "kind", "team", "priority", "model")
	if err != nil {
		return nil, err
	}
	w := &Workload{Name: "csv", Nodes: nodes}
	for i := range t.rows {
		r := t.row(i)
		submit, dur := r.duration("submit"), r.duration("duration")
		gpus, prio := r.int("gpus", 0), r.int("priority", 0)
		if r.err != nil {
			return nil, r.err
		}
		if dur <= 0 {
			return nil, t.fail(i, "duration", "must be positive")
		}
		topo, err := model.ParseTopology(t.get(i, "topology"))
		if err != nil {
			return nil, t.fail(i, "topology", "%q is not one of node, pod, any", t.get(i, "topology"))
		}
		shape := model.Shape{GPUs: int(gpus), Topology: topo}
		if m := t.get(i, "model"); m != "" {
			shape.Models = strings.Split(m, "|")
		}
		if err := shape.Validate(""); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", t.path, t.line[i], err)
		}
		id := t.get(i, "id")
		if id == "" {
			id = fmt.Sprintf("row%d", t.line[i])
		}
		switch kind := t.get(i, "kind"); kind {
		case "training":
			j := JobSpec{ID: id, Submit: submit, Work: dur, Shape: shape, Team: t.get(i, "team"), Priority: int(prio)}
			switch p := t.get(i, "preemptible"); p {
			case "", "false":
			case "true":
				j.Preemptible = true
			default:
				return nil, t.fail(i, "preemptible", "%q is not true or false", p)
			}
			j.CheckpointBytes, j.MaxRuntime = r.int("checkpoint_gb", 10)*1e9, r.duration("max_runtime")
			if r.err != nil {
				return nil, r.err
			}
			w.Jobs = append(w.Jobs, j)
		case "inference":
			w.Services = append(w.Services, ServiceSpec{ID: id, Shape: shape, Min: 0, Max: 1, Priority: 1000 + int(prio),
				Demand: []DemandPoint{{At: submit, Replicas: 1}, {At: submit + dur, Replicas: 0}}})
		default:
			return nil, t.fail(i, "kind", "%q is not one of training, inference", kind)
		}
	}
	sortJobs(w.Jobs)
	return w, nil
}

func sortJobs(jobs []JobSpec) {
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
}
