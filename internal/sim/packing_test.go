package sim

import (
	"fmt"
	"testing"
	"time"
)

func TestPackingProbe(t *testing.T) {
	nodes, err := LoadPackNodes("../../../shared/traces/openb/openb_node_list_gpu_node.csv")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadPackPods("../../../shared/traces/openb/openb_pod_list_default.csv")
	if err != nil {
		t.Fatal(err)
	}
	typ := typicalPods(pods)
	t.Logf("%d nodes, %d pods, %d typical types", len(nodes), len(pods), len(typ))
	for name, pol := range map[string]packPolicy{"random": randomPolicy{}, "bestfit": bestFitPolicy{}, "fgd": &cached{sc: fgdScorer{typ}}, "berth": &cached{sc: newBerthScorer(pods)}} {
		t0 := time.Now()
		var sum float64
		for seed := int64(42); seed <= 51; seed++ {
			list := PackingWorkload(pods, nodes, 1.3, seed)
			res := RunPacking(nodes, list, pol, seed, 130)
			sum += res.Unallocated[100]
		}
		t.Logf("%s: %.2f (%v)", name, sum/10, time.Since(t0))
	}
	_ = fmt.Sprint
}
