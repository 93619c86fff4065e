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
