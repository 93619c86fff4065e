package sim

import (
	"testing"
)

func TestSmokeTmp(t *testing.T) {
	c, err := LoadSeedConfig("")
	if err != nil {
		t.Fatal(err)
	}
	c.Days = 7
	w := Seed(c, 1)
	tr, inf := w.gpuHours()
	t.Logf("jobs %d services %d training %.0f GPUh inference %.0f GPUh", len(w.Jobs), len(w.Services), tr, inf)
	for _, name := range PolicyNames {
		p, _ := NewPolicy(name, 1)
		m, err := Run(w, p, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-12s alloc %.1f%% eff %.1f%% largest %+v done %d/%d never %d q %+v shed %.1f%% within60 %.0f%% preempt %d %v pages %d starv %d wall %.2fs events %d passes %d",
			m.Policy, m.AllocationPct, m.EffectivePct, m.LargestPlaceable, m.JobsCompleted, m.JobsSubmitted, m.JobsNeverStarted, m.QueueHours[">=256"], m.DemandShedPct, m.CapacityWithin60sPct, m.Preemptions, m.PreemptionsFor, m.Pages, m.StarvationAlerts, m.WallSeconds, m.Events, m.Passes)
	}
}
