package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

func slurmFleet() []model.Node {
	var nodes []model.Node
	for i := range 8 {
		nodes = append(nodes, model.Node{ID: "n" + string(rune('0'+i)), Pod: "pod-" + string(rune('a'+i/4)), GPUs: 8, Model: "H100"})
	}
	return nodes
}

// TestLoadSlurmSacct: sacct -P output with steps, a requeued job (two
// runs), a CPU-only job, a pending one and an inference partition.
func TestLoadSlurmSacct(t *testing.T) {
	p := writeFile(t, "history", `JobID|JobName|Partition|QOS|Account|Submit|Start|End|State|NNodes|AllocTRES
100|sweep|train|normal|nlp|2026-11-02T10:00:00|2026-11-02T10:00:05|2026-11-02T10:30:05|COMPLETED|1|billing=1,cpu=1,gres/gpu=1,mem=4G,node=1
100.batch|batch||||2026-11-02T10:00:05|2026-11-02T10:00:05|2026-11-02T10:30:05|COMPLETED|1|cpu=1,gres/gpu=1,mem=4G,node=1
101|gang|train|normal|research|2026-11-02T10:10:00|2026-11-02T10:20:00|2026-11-02T11:20:00|PREEMPTED|2|cpu=2,gres/gpu=16,gres/gpu:h100=16,node=2
101|gang|train|normal|research|2026-11-02T11:22:00|2026-11-02T11:30:00|2026-11-02T12:00:00|COMPLETED|2|cpu=2,gres/gpu=16,gres/gpu:h100=16,node=2
102|cpu|cpu|normal|nlp|2026-11-02T10:00:00|2026-11-02T10:00:00|2026-11-02T10:05:00|COMPLETED|1|cpu=4,node=1
103|later|train|normal|nlp|2026-11-02T12:00:00|Unknown|Unknown|PENDING|1|
106|chat.r2|serve|high|serving|2026-11-02T09:00:00|2026-11-02T10:00:01|2026-11-02T11:00:01|CANCELLED by 0|1|cpu=1,gres/gpu=4,node=1
104|chat.r1|serve|high|serving|2026-11-02T09:00:00|2026-11-02T09:00:01|2026-11-02T13:00:01|CANCELLED by 0|1|cpu=1,gres/gpu:a100=2,gres/gpu:v100=2,node=1
105|odd|train|normal|nlp|2026-11-02T12:00:00|Unknown|Unknown|PENDING|many|
`)
	w, err := LoadSlurm(p, slurmFleet(), SlurmMapping{Inference: []string{"serve"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 2 || len(w.Services) != 1 {
		t.Fatalf("got %d jobs and %d services, want 2 and 1: %+v", len(w.Jobs), len(w.Services), w.Jobs)
	}
	sweep, gang := w.Jobs[0], w.Jobs[1]
	if sweep.ID != "100-sweep" || sweep.Shape.GPUs != 1 || sweep.Shape.Topology != model.TopologyNode || sweep.Team != "nlp" {
		t.Errorf("sweep: %+v", sweep)
	}
	// t0 is the earliest submit (the inference job's, 09:00).
	if sweep.Submit != time.Hour || sweep.Work != 30*time.Minute {
		t.Errorf("sweep submit %v work %v, want 1h and 30m", sweep.Submit, sweep.Work)
	}
	// Two runs: 60m + 30m of work, submitted at the first submit.
	if gang.Shape.GPUs != 16 || gang.Shape.Topology != model.TopologyPod || gang.Work != 90*time.Minute || gang.Submit != 70*time.Minute {
		t.Errorf("gang: %+v", gang)
	}
	// Two replicas of one service: one from 0:00:01 to 4:00:01, the
	// other from 1:00:01 to 2:00:01.
	svc := w.Services[0]
	want := []DemandPoint{{time.Second, 1}, {time.Hour + time.Second, 2}, {2*time.Hour + time.Second, 1}, {4*time.Hour + time.Second, 0}}
	if svc.ID != "chat" || svc.Shape.GPUs != 4 || svc.Max != 2 || !slices.Equal(svc.Demand, want) {
		t.Errorf("service: %+v", svc)
	}
	if len(w.Notes) != 1 || !strings.Contains(w.Notes[0], "1 job steps, 1 jobs without GPUs, 2 never started") {
		t.Errorf("notes: %q", w.Notes)
	}
	w3, err := LoadSlurm(p, slurmFleet(), SlurmMapping{Inference: []string{"serve"}, TimeScale: 60})
	if err != nil || w3.Jobs[0].Submit != 60*time.Hour || w3.Jobs[0].Work != 30*time.Hour || w3.Services[0].Demand[0].At != time.Minute {
		t.Errorf("time scale 60: %v %+v %+v", err, w3.Jobs[0], w3.Services[0])
	}
	w2, err := LoadSlurm(p, slurmFleet(), SlurmMapping{MultiNode: model.TopologyAny})
	if err != nil {
		t.Fatal(err)
	}
	if len(w2.Jobs) != 4 || !slices.ContainsFunc(w2.Jobs, func(j JobSpec) bool { return j.ID == "101-gang" && j.Shape.Topology == model.TopologyAny }) {
		t.Errorf("with no inference partition and multinode any: %+v", w2.Jobs)
	}
}

// TestLoadSlurmJobcomp: the jobcomp/filetxt log, values with spaces.
func TestLoadSlurmJobcomp(t *testing.T) {
	p := writeFile(t, "history", `JobId=13 UserId=root(0) GroupId=root(0) Name=finetune one JobState=COMPLETED Partition=train TimeLimit=2 StartTime=2026-12-03T14:18:36 EndTime=2026-12-03T14:18:53 NodeList=n008 NodeCnt=1 ProcCnt=1 WorkDir=/tmp/my dir ReservationName= Tres=cpu=1,mem=62.50G,node=1,billing=1,gres/gpu=8 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-12-03T14:18:30 EligibleTime=2026-12-03T14:18:36 DerivedExitCode=0:0 ExitCode=0:0
JobId=14 UserId=root(0) GroupId=root(0) Name=g JobState=COMPLETED Partition=train TimeLimit=2 StartTime=2026-12-03T14:19:00 EndTime=2026-12-03T14:20:00 NodeList=n[001-002] NodeCnt=2 ProcCnt=2 WorkDir=/tmp ReservationName= Tres=cpu=2,node=2,gres/gpu=16 Account=research QOS= WcKey= Cluster=unknown SubmitTime=2026-12-03T14:18:40 EligibleTime=2026-12-03T14:18:40 DerivedExitCode=0:0 ExitCode=0:0
`)
	w, err := LoadSlurm(p, slurmFleet(), SlurmMapping{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 2 {
		t.Fatalf("jobs: %+v", w.Jobs)
	}
	if j := w.Jobs[0]; j.ID != "13-finetune one" || j.Shape.GPUs != 8 || j.Work != 17*time.Second || j.Submit != 0 {
		t.Errorf("job 13: %+v", j)
	}
	if j := w.Jobs[1]; j.Shape.GPUs != 16 || j.Shape.Topology != model.TopologyPod || j.Team != "research" || j.Submit != 10*time.Second {
		t.Errorf("job 14: %+v", j)
	}
}

// TestLoadSlurmErrors: each names the file, the line and the field.
func TestLoadSlurmErrors(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"no header", "a|b\n1|2\n", "history:1: neither an sacct -P header naming JobID"},
		{"bad time", "JobID|Submit|Start|End|NNodes|AllocTRES\n1|yesterday|2026-11-02T10:00:05|2026-11-02T10:30:05|1|gres/gpu=1\n", "history:2: Submit: \"yesterday\" is not a time"},
		{"fields", "JobID|Submit|Start|End|NNodes|AllocTRES\n1|2026-11-02T10:00:05\n", "history:2: 2 fields, the header has 6"},
		{"no gpu field", "JobID|Submit|Start|End|NNodes\n1|2026-11-02T10:00:05|2026-11-02T10:00:05|2026-11-02T10:30:05|1\n", "history:2: GPUs: no AllocTRES, ReqTRES"},
		{"too big", "JobID|Submit|Start|End|NNodes|AllocTRES\n7|2026-11-02T10:00:05|2026-11-02T10:00:05|2026-11-02T10:30:05|1|gres/gpu=16\n", "history:2: job 7: 16 GPUs on one node, but the fleet's nodes have at most 8"},
		{"nnodes", "JobID|Submit|Start|End|NNodes|AllocTRES\n7|2026-11-02T10:00:05|2026-11-02T10:00:05|2026-11-02T10:30:05|two|gres/gpu=1\n", "history:2: NNodes: \"two\" is not a whole number"},
		{"no gpus at all", "JobId=1 Name=a JobState=COMPLETED StartTime=2026-12-03T14:18:36 EndTime=2026-12-03T14:18:53 NodeCnt=1 Tres=cpu=1,node=1 SubmitTime=2026-12-03T14:18:30\n", "AccountingStorageTRES=gres/gpu"},
	} {
		_, err := LoadSlurm(writeFile(t, "history", c.body), slurmFleet(), SlurmMapping{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := LoadSlurm(writeFile(t, "history", "JobID\n"), slurmFleet(), SlurmMapping{MultiNode: "rack"}); err == nil || !strings.Contains(err.Error(), "--slurm-multinode") {
		t.Errorf("multinode rack: %v", err)
	}
}
