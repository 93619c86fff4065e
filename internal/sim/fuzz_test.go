package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/berthsched/berth/internal/model"
)

// The trace loaders read files a user hands `berth sim`. For any bytes
// they must not panic, and what they accept must hold no job the engine
// could not place as described: positive GPUs, a known topology.
// Seeds live in testdata/fuzz/<FuzzName>/ and in the adds below.

func fuzzFile(f *testing.F) func(t *testing.T, data []byte) string {
	dir := f.TempDir()
	return func(t *testing.T, data []byte) string {
		p := filepath.Join(dir, "in.csv")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func FuzzLoadCSV(f *testing.F) {
	f.Add([]byte("submit,duration,gpus,topology,kind,team,priority,model\n0s,1h,8,node,training,a,0,\n10m,30m,1,any,inference,b,100,H100|A100\n"))
	f.Add([]byte("submit,duration,gpus,topology,kind,team,priority,model,preemptible,checkpoint_gb,max_runtime\n0s,1h,16,pod,training,a,0,,true,40,2h\n"))
	write := fuzzFile(f)
	nodes := []model.Node{{ID: "n1", Pod: "p1", Model: "H100", GPUs: 8}, {ID: "n2", Pod: "p1", Model: "H100", GPUs: 8}}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := LoadCSV(write(t, data), nodes)
		if err != nil {
			return
		}
		for _, j := range w.Jobs {
			if j.Shape.GPUs < 1 || j.Work <= 0 {
				t.Fatalf("accepted a job of %d GPUs for %s", j.Shape.GPUs, j.Work)
			}
			if _, err := model.ParseTopology(string(j.Shape.Topology)); err != nil {
				t.Fatalf("accepted topology %q", j.Shape.Topology)
			}
		}
	})
}

func FuzzLoadOpenB(f *testing.F) {
	pods, _ := os.ReadFile("testdata/openb_pods_40.csv")
	nodes, _ := os.ReadFile("testdata/openb_nodes_20.csv")
	f.Add(pods[:min(len(pods), 2000)], nodes[:min(len(nodes), 1000)])
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,500\n"), nodes[:min(len(nodes), 1000)])
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, podData, nodeData []byte) {
		pp, np := filepath.Join(dir, "pods.csv"), filepath.Join(dir, "nodes.csv")
		if os.WriteFile(pp, podData, 0o600) != nil || os.WriteFile(np, nodeData, 0o600) != nil {
			t.Fatal("writing the inputs")
		}
		if _, err := LoadOpenB(pp, np); err != nil {
			return
		}
		if _, err := LoadPackPods(pp); err != nil {
			return
		}
		if _, err := LoadPackNodes(np); err != nil {
			return
		}
	})
}

func FuzzLoadSlurm(f *testing.F) {
	f.Add([]byte("JobID|JobName|Partition|QOS|Account|Submit|Start|End|State|NNodes|AllocTRES\n" +
		"1|a|train|normal|x|2026-11-02T10:00:00|2026-11-02T10:00:05|2026-11-02T10:30:05|COMPLETED|2|cpu=2,gres/gpu=16,node=2\n" +
		"2|b|infer|high|y|2026-11-02T10:00:00|2026-11-02T10:00:05|2026-11-02T11:30:05|CANCELLED|1|gres/gpu:h100=4\n"))
	f.Add([]byte("JobId=13 Name=a b JobState=COMPLETED Partition=train StartTime=2026-12-03T14:18:36 EndTime=2026-12-03T14:18:53 NodeCnt=1 Tres=cpu=1,gres/gpu=8 SubmitTime=2026-12-03T14:18:30\n"))
	write := fuzzFile(f)
	nodes := []model.Node{{ID: "n1", Pod: "p1", Model: "H100", GPUs: 8}, {ID: "n2", Pod: "p1", Model: "H100", GPUs: 8}}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := LoadSlurm(write(t, data), nodes, SlurmMapping{Inference: []string{"infer"}})
		if err != nil {
			return
		}
		for _, j := range w.Jobs {
			if j.Shape.GPUs < 1 || j.Work <= 0 || j.Submit < 0 {
				t.Fatalf("accepted a job of %d GPUs for %s at %s", j.Shape.GPUs, j.Work, j.Submit)
			}
			if j.Shape.Topology == model.TopologyNode && j.Shape.GPUs > 8 {
				t.Fatalf("accepted %d GPUs on one 8-GPU node", j.Shape.GPUs)
			}
		}
		for _, s := range w.Services {
			if s.Shape.GPUs < 1 || len(s.Demand) != 2 || s.Demand[1].At < s.Demand[0].At {
				t.Fatalf("accepted a service %+v", s)
			}
		}
	})
}
