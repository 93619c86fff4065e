package sim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// SlurmFormats documents what `--workload slurm --sacct FILE` reads, for
// `berth sim`'s help.
const SlurmFormats = `Slurm job history (--workload slurm --sacct FILE), either of:
  sacct -P output with a header row, e.g.
    sacct -a -P -X -D -S 2026-11-01 -E 2026-12-01 \
      --format=JobID,JobName,Partition,QOS,Account,Submit,Start,End,State,NNodes,AllocTRES
  the jobcomp/filetxt log (JobCompType=jobcomp/filetxt; no database
  needed; GPUs appear in its Tres= only with AccountingStorageTRES=gres/gpu)
Needed per job: JobID, Submit, Start, End, NNodes, and its GPUs from
AllocTRES/ReqTRES/Tres (gres/gpu=N) or AllocGRES/ReqGRES (gpu:N). Optional:
JobName, Partition, QOS, Account, State, Priority. Job steps (123.batch)
are skipped; a job's runs (requeues) add up to its work. One node: topology
node; more: --slurm-multinode (pod). Partitions or QOS named in
--slurm-inference are inference replicas, alive from start to end.
--slurm-time-scale F multiplies every time (60 for a history berth bench
slurm wrote at 60x).`

// SlurmMapping says how Slurm's notions become berth's.
type SlurmMapping struct {
	// Inference names partitions or QOS whose jobs are inference
	// replicas; everything else is training.
	Inference []string
	// MultiNode is the topology of a job on more than one node (pod: the
	// gang wanted one leaf switch; any: it did not care).
	MultiNode model.Topology
	// TimeScale multiplies every time in the history (0 or 1: as it is).
	// A history written in compressed time, like `berth bench slurm`'s
	// at 60x, replays at the workload's own clock with 60.
	TimeScale float64
}

// slurmRecord is one job run as the history has it, fields by their
// canonical name.
type slurmRecord struct {
	line   int
	fields map[string]string
}

// slurmFields maps every accepted spelling to one name.
var slurmFields = map[string]string{
	"jobid": "jobid", "jobidraw": "jobid",
	"jobname": "name", "name": "name",
	"partition": "partition", "qos": "qos", "account": "account", "user": "user",
	"submit": "submit", "submittime": "submit",
	"start": "start", "starttime": "start",
	"end": "end", "endtime": "end",
	"state": "state", "jobstate": "state",
	"nnodes": "nnodes", "nodecnt": "nnodes",
	"alloctres": "tres", "tres": "tres", "reqtres": "reqtres",
	"allocgres": "gres", "reqgres": "reqgres",
	"priority": "priority",
}

// LoadSlurm reads a Slurm site's job history (see SlurmFormats) into a
// replay on the given nodes.
func LoadSlurm(path string, nodes []model.Node, m SlurmMapping) (*Workload, error) {
	if m.MultiNode == "" {
		m.MultiNode = model.TopologyPod
	}
	if m.MultiNode != model.TopologyPod && m.MultiNode != model.TopologyAny {
		return nil, fmt.Errorf("--slurm-multinode: %q is not one of pod, any", m.MultiNode)
	}
	if len(nodes) == 0 {
		return nil, errors.New("--workload slurm: no nodes to replay on")
	}
	if m.TimeScale == 0 {
		m.TimeScale = 1
	}
	if m.TimeScale < 0 || m.TimeScale > 1e6 {
		return nil, fmt.Errorf("--slurm-time-scale: %g: expected a positive number up to 1e6", m.TimeScale)
	}
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * m.TimeScale) }
	recs, err := readSlurm(path)
	if err != nil {
		return nil, err
	}
	perNode := 0
	for _, n := range nodes {
		perNode = max(perNode, n.GPUs)
	}
	type job struct {
		first          slurmRecord
		submit, start  time.Time
		work           time.Duration
		gpus, nodes    int
		name, part     string
		qos, team      string
		prio           int
		last           int
		runs, finished int
	}
	jobs := map[string]*job{}
	var order []string
	var skipped struct{ steps, noGPU, notStarted, running int }
	for _, r := range recs {
		f := func(k string) string { return r.fields[k] }
		id := f("jobid")
		if id == "" {
			return nil, fmt.Errorf("%s:%d: JobID: missing", path, r.line)
		}
		if strings.Contains(id, ".") {
			skipped.steps++
			continue
		}
		submit, err := slurmTime(path, r, "submit", true)
		if err != nil {
			return nil, err
		}
		start, err := slurmTime(path, r, "start", false)
		if err != nil {
			return nil, err
		}
		end, err := slurmTime(path, r, "end", false)
		if err != nil {
			return nil, err
		}
		gpus, err := slurmGPUs(path, r)
		if err != nil {
			return nil, err
		}
		switch {
		case start.IsZero():
			skipped.notStarted++
			continue
		case end.IsZero():
			skipped.running++
			continue
		case gpus == 0:
			skipped.noGPU++
			continue
		}
		nn := 1
		if s := f("nnodes"); s != "" {
			if nn, err = strconv.Atoi(s); err != nil || nn < 0 {
				return nil, fmt.Errorf("%s:%d: NNodes: %q is not a whole number", path, r.line, s)
			}
		}
		prio := 0
		if s := f("priority"); s != "" {
			if prio, err = strconv.Atoi(s); err != nil {
				return nil, fmt.Errorf("%s:%d: Priority: %q is not a whole number", path, r.line, s)
			}
		}
		j := jobs[id]
		if j == nil {
			team := f("account")
			if team == "" {
				team = f("user")
			}
			j = &job{first: r, submit: submit, start: start, name: f("name"), part: f("partition"), qos: f("qos"), team: team}
			jobs[id] = j
			order = append(order, id)
		}
		if submit.Before(j.submit) {
			j.submit = submit
		}
		if end.After(start) {
			j.work += end.Sub(start)
		}
		j.gpus, j.nodes, j.prio, j.last = gpus, max(nn, 1), prio, r.line
		j.runs++
	}
	if len(jobs) == 0 {
		hint := ""
		if skipped.noGPU > 0 {
			hint = "; a jobcomp/filetxt log records GPUs only when slurm.conf has AccountingStorageTRES=gres/gpu"
		}
		return nil, fmt.Errorf("%s: no job that ran on GPUs (%d steps, %d without GPUs, %d never started, %d still running)%s",
			path, skipped.steps, skipped.noGPU, skipped.notStarted, skipped.running, hint)
	}
	var t0 time.Time
	for _, j := range jobs {
		if t0.IsZero() || j.submit.Before(t0) {
			t0 = j.submit
		}
	}
	w := &Workload{Name: "slurm", Nodes: nodes}
	services := map[string]*replicaSet{}
	var serviceOrder []string
	for _, id := range order {
		j := jobs[id]
		work := max(scale(j.work), time.Second)
		shape := model.Shape{GPUs: j.gpus, Topology: model.TopologyNode}
		if j.nodes > 1 {
			shape.Topology = m.MultiNode
		} else if j.gpus > perNode {
			return nil, fmt.Errorf("%s:%d: job %s: %d GPUs on one node, but the fleet's nodes have at most %d (replay on the site's own node list: --nodes FILE)",
				path, j.last, id, j.gpus, perNode)
		}
		if err := shape.Validate(""); err != nil {
			return nil, fmt.Errorf("%s:%d: job %s: %w", path, j.last, id, err)
		}
		name := id
		if j.name != "" {
			name = id + "-" + j.name
		}
		if slices.Contains(m.Inference, j.part) || (j.qos != "" && slices.Contains(m.Inference, j.qos)) {
			at := scale(j.start.Sub(t0))
			key := replicaOf.ReplaceAllString(j.name, "") + fmt.Sprintf("/%d/%s", j.gpus, shape.Topology)
			if j.name == "" {
				key = name
			}
			svc := services[key]
			if svc == nil {
				svc = &replicaSet{id: strings.TrimSuffix(key, fmt.Sprintf("/%d/%s", j.gpus, shape.Topology)), shape: shape, prio: j.prio}
				services[key] = svc
				serviceOrder = append(serviceOrder, key)
			}
			svc.edges = append(svc.edges, edge{at, +1}, edge{at + work, -1})
			continue
		}
		w.Jobs = append(w.Jobs, JobSpec{ID: name, Submit: scale(j.submit.Sub(t0)), Work: work, Shape: shape, Team: j.team,
			Priority: j.prio, Preemptible: true, CheckpointBytes: 10e9})
	}
	sortJobs(w.Jobs)
	ids := map[string]int{}
	for _, key := range serviceOrder {
		svc := services[key]
		id := svc.id
		if ids[id]++; ids[id] > 1 {
			id = fmt.Sprintf("%s-%d", id, ids[id]) // the same name at another shape
		}
		w.Services = append(w.Services, svc.spec(id))
	}
	w.Notes = append(w.Notes, fmt.Sprintf("replayed %d Slurm jobs from %s: work is each job's elapsed time on the site, all runs added "+
		"(so it includes what the site's own placement and preemptions cost); skipped %d job steps, %d jobs without GPUs, %d never started, %d still running",
		len(jobs), path, skipped.steps, skipped.noGPU, skipped.notStarted, skipped.running))
	return w, nil
}

// replicaOf is a replica's index at the end of a job name ("chat.r3",
// "chat-12", "chat_4"): replicas of one service differ only there.
var replicaOf = regexp.MustCompile(`[._-]r?\d+$`)

type edge struct {
	at time.Duration
	d  int
}

// replicaSet is one service's replica jobs: its demand is how many ran
// at once, its max the most that ever did.
type replicaSet struct {
	id    string
	shape model.Shape
	prio  int
	edges []edge
}

func (r *replicaSet) spec(id string) ServiceSpec {
	sort.SliceStable(r.edges, func(a, b int) bool { return r.edges[a].at < r.edges[b].at })
	s := ServiceSpec{ID: id, Shape: r.shape, Priority: 1000 + r.prio}
	n := 0
	for k, e := range r.edges {
		n += e.d
		s.Max = max(s.Max, n)
		if k+1 < len(r.edges) && r.edges[k+1].at == e.at {
			continue // one point per instant
		}
		s.Demand = append(s.Demand, DemandPoint{At: e.at, Replicas: n})
	}
	return s
}

// readSlurm reads either format, telling them apart by the first line:
// jobcomp's starts with JobId=.
func readSlurm(path string) ([]slurmRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var recs []slurmRecord
	var header []string
	jobcomp := false
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if header == nil && !jobcomp {
			if strings.HasPrefix(l, "JobId=") {
				jobcomp = true
			} else {
				header = strings.Split(l, "|")
				seen := false
				for i, h := range header {
					header[i] = slurmFields[strings.ToLower(strings.TrimSpace(h))]
					seen = seen || header[i] == "jobid"
				}
				if !seen {
					return nil, fmt.Errorf("%s:1: neither an sacct -P header naming JobID nor a jobcomp/filetxt line (JobId=...)", path)
				}
				continue
			}
		}
		r := slurmRecord{line: n, fields: map[string]string{}}
		if jobcomp {
			if err := jobcompFields(l, r.fields); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
		} else {
			vals := strings.Split(l, "|")
			if len(vals) != len(header) {
				return nil, fmt.Errorf("%s:%d: %d fields, the header has %d", path, n, len(vals), len(header))
			}
			for i, v := range vals {
				if header[i] != "" {
					r.fields[header[i]] = strings.TrimSpace(v)
				}
			}
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return recs, nil
}

var jobcompKey = regexp.MustCompile(`(?:^| )([A-Za-z]+)=`)

// jobcompFields splits a jobcomp/filetxt line: Key=value pairs separated
// by spaces, where a value (WorkDir, Name) may itself hold spaces.
func jobcompFields(l string, into map[string]string) error {
	idx := jobcompKey.FindAllStringSubmatchIndex(l, -1)
	if len(idx) == 0 || !strings.HasPrefix(l, "JobId=") {
		return errors.New("not a jobcomp/filetxt line (it starts JobId=)")
	}
	for k, m := range idx {
		end := len(l)
		if k+1 < len(idx) {
			end = idx[k+1][0]
		}
		key := strings.ToLower(l[m[2]:m[3]])
		if canon, ok := slurmFields[key]; ok {
			into[canon] = strings.TrimSpace(l[m[1]:end])
		}
	}
	return nil
}

// slurmTime parses Slurm's time format; Unknown, None and empty are
// zero (an error when required).
func slurmTime(path string, r slurmRecord, field string, required bool) (time.Time, error) {
	s := r.fields[field]
	switch s {
	case "", "Unknown", "None", "N/A":
		if required {
			return time.Time{}, fmt.Errorf("%s:%d: %s: missing (expected a time like 2026-12-03T14:18:36)", path, r.line, slurmName(field))
		}
		return time.Time{}, nil
	}
	t, err := time.Parse("2006-01-02T15:04:05", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s:%d: %s: %q is not a time like 2026-12-03T14:18:36", path, r.line, slurmName(field), s)
	}
	return t, nil
}

var gpuTRES = regexp.MustCompile(`(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)`)
var gpuGRES = regexp.MustCompile(`(?:^|,)gpu(?::[^:,(]+)?:(\d+)`)

// slurmGPUs is the job's GPUs: the allocated TRES, else the requested
// ones, else the GRES fields of older sacct. The untyped total
// (gres/gpu=8) when there is one, else the typed counts added up
// (gres/gpu:a100=2,gres/gpu:v100=2 is 4).
func slurmGPUs(path string, r slurmRecord) (int, error) {
	present := false
	for _, k := range []string{"tres", "reqtres"} {
		s, ok := r.fields[k]
		present = present || ok
		if s != "" {
			return sumFirst(path, r, k, gpuTRES.FindAllStringSubmatch(s, -1))
		}
	}
	for _, k := range []string{"gres", "reqgres"} {
		s, ok := r.fields[k]
		present = present || ok
		if s != "" {
			return sumFirst(path, r, k, gpuGRES.FindAllStringSubmatch(s, -1))
		}
	}
	if present {
		return 0, nil // a job that asked for nothing (a pending job's AllocTRES)
	}
	return 0, fmt.Errorf("%s:%d: GPUs: no AllocTRES, ReqTRES, Tres, AllocGRES or ReqGRES field to read them from", path, r.line)
}

func sumFirst(path string, r slurmRecord, field string, ms [][]string) (int, error) {
	total, typed, untyped := 0, 0, false
	for _, m := range ms {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 1<<20 {
			return 0, fmt.Errorf("%s:%d: %s: %q is not a GPU count", path, r.line, slurmName(field), m[1])
		}
		// The match starts at the field or its comma: "gres/gpu=" or
		// ",gres/gpu:a100=" (TRES), "gpu:8" or "gpu:a100:2" (GRES).
		name := strings.TrimPrefix(m[0], ",")
		if field == "tres" || field == "reqtres" {
			if !strings.Contains(name, ":") {
				total, untyped = n, true
				continue
			}
		} else if strings.Count(name, ":") == 1 {
			total, untyped = n, true
			continue
		}
		typed = min(typed+n, 1<<20)
	}
	if untyped {
		return total, nil
	}
	return typed, nil
}

// slurmName is the field's name as sacct spells it, for errors.
func slurmName(canon string) string {
	return map[string]string{"submit": "Submit", "start": "Start", "end": "End", "tres": "AllocTRES", "reqtres": "ReqTRES",
		"gres": "AllocGRES", "reqgres": "ReqGRES"}[canon]
}
