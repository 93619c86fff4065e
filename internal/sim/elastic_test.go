package sim

import (
	"testing"
)

// TestElasticVariant: seed-heavy-elastic makes the same jobs elastic on
// every run; berth resizes them (grows into idle GPUs, shrinks for the
// work that needs them back), berth-rigid, the baseline of the same core,
// never does, and every resize is paid for in lost GPU-hours.
func TestElasticVariant(t *testing.T) {
	c, err := LoadSeedVariant("seed-heavy-elastic", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Days = 10
	w := Seed(c, 1)
	elastic, big := 0, 0
	w.eachJob(func(j *JobSpec) {
		if j.Shape.GPUs >= 64 {
			big++
		}
		if e := j.Elastic; e != nil {
			elastic++
			if e.MaxGPUs != j.Shape.GPUs || e.MinGPUs != j.Shape.GPUs/2 || j.Shape.GPUs < 64 {
				t.Fatalf("job %s: elastic %+v for %d GPUs, want half to all of 64 or more", j.ID, e, j.Shape.GPUs)
			}
		}
	})
	if elastic == 0 || elastic == big {
		t.Fatalf("%d of %d jobs of 64+ GPUs elastic, want about half", elastic, big)
	}
	run := func(policy string) *Metrics {
		pol, err := NewPolicy(policy, 1)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Run(w, pol, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	rigid, el := run("berth-rigid"), run("berth")
	if rigid.Shrinks+rigid.Grows != 0 {
		t.Fatalf("berth-rigid resized %d/%d times", rigid.Shrinks, rigid.Grows)
	}
	if el.Grows == 0 {
		t.Fatalf("berth never grew an elastic job in 10 days (shrinks %d)", el.Shrinks)
	}
	if el.QueueHours[ElasticClass].Count == 0 || rigid.QueueHours[ElasticClass].Count == 0 {
		t.Fatalf("the elastic class is empty: %+v / %+v", el.QueueHours[ElasticClass], rigid.QueueHours[ElasticClass])
	}
	if el.LostGPUHours <= rigid.LostGPUHours {
		t.Errorf("resizes cost nothing: lost %.1f GPU-h elastic, %.1f rigid", el.LostGPUHours, rigid.LostGPUHours)
	}
	if rigid.JobsSubmitted != el.JobsSubmitted {
		t.Errorf("not the same jobs: %d and %d submitted", rigid.JobsSubmitted, el.JobsSubmitted)
	}
}

func TestElasticPickIsStable(t *testing.T) {
	n := 0
	for i := range 2000 {
		id := "large-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		if elasticPick(id, 0.5) != elasticPick(id, 0.5) {
			t.Fatal("not deterministic")
		}
		if elasticPick(id, 0.5) {
			n++
		}
		if elasticPick(id, 0.25) && !elasticPick(id, 0.5) {
			t.Fatalf("%s is elastic at a quarter but not at half: shares must nest", id)
		}
	}
	if n < 850 || n > 1150 {
		t.Fatalf("%d of 2000 picked at a share of 0.5", n)
	}
}

// TestElasticNodeClass: a `node` class made elastic runs between half its
// GPUs and all of them on its one node. Its minimum and its growth are
// parts of one node, which is no split: berth still stretches no job.
func TestElasticNodeClass(t *testing.T) {
	c, err := LoadSeedVariant("seed", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Days = 4
	for i := range c.Training.Classes {
		if k := &c.Training.Classes[i]; k.Name == "finetune" {
			k.Elastic = 1
		}
	}
	w := Seed(c, 1)
	elastic := 0
	w.eachJob(func(j *JobSpec) {
		if e := j.Elastic; e != nil {
			elastic++
			if j.Shape.Topology != "node" || e.MinGPUs != 4 || e.MaxGPUs != 8 {
				t.Fatalf("job %s (%s, %d GPUs): elastic %+v, want 4 to 8 of one node", j.ID, j.Shape.Topology, j.Shape.GPUs, e)
			}
		}
	})
	if elastic == 0 {
		t.Fatal("no finetune job was made elastic")
	}
	pol, err := NewPolicy("berth", 1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Run(w, pol, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m.Grows+m.Shrinks == 0 {
		t.Errorf("no elastic node job was resized in %v days", c.Days)
	}
	if m.StretchedJobs != 0 {
		t.Errorf("%d jobs counted as split across nodes; berth places none so", m.StretchedJobs)
	}
}
