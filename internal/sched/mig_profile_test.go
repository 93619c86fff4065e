package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// A share that names a MIG profile runs only on an instance of that
// name: a 1g.10gb and a 1g.20gb are the same size in milli and different
// devices to Kubernetes, and a 3g request never takes the 4g.
func TestMIGProfileIsExact(t *testing.T) {
	fleet := func() []model.Node {
		nodes := shareFleet("sharing", 0, 1, 2)
		nodes[0].MIG = [][]int{{571, 285, 142}, {428, 428, 142}}
		nodes[0].MIGProfiles = [][]string{{"4g.40gb", "2g.20gb", "1g.20gb"}, {"3g.40gb", "3g.40gb", "1g.10gb"}}
		return nodes
	}
	req := func(id string, milli int, prof string) model.Request {
		r := shareReq(id, milli)
		r.MIGProfile = prof
		return r
	}
	ix := NewIndex(fleet(), nil, Config{})
	for k, prof := range []string{"3g.40gb", "3g.40gb"} {
		r := req("s"+string(rune('a'+k)), 428, prof)
		pl, why := ix.Place(&r, Pools{})
		if why != nil {
			t.Fatalf("3g share %d: %v", k, why)
		}
		if p := pl.Parts[0]; gpuOf(p.GPUs) != 1 || p.MIGInstance != k+1 {
			t.Fatalf("3g share %d on GPU %d instance %d, want GPU 1 instance %d", k, gpuOf(p.GPUs), p.MIGInstance, k+1)
		}
	}
	// Both 3g are taken; the 4g on GPU 0 holds 428 milli but is not a 3g.
	r := req("sc", 428, "3g.40gb")
	if _, why := ix.Place(&r, Pools{}); why == nil || why.Constraint != "mig_profile" ||
		!strings.Contains(why.Message, "profile 3g.40gb") || !strings.Contains(why.Message, "it has 2 of them, 0 free") {
		t.Fatalf("a third 3g share: %v, want a mig_profile reason counting 2 instances, 0 free", why)
	}
	// Without a profile the same share takes the 4g.
	r = shareReq("sd", 428)
	if pl, why := ix.Place(&r, Pools{}); why != nil || gpuOf(pl.Parts[0].GPUs) != 0 || pl.Parts[0].MIGInstance != 1 {
		t.Fatalf("a 428m share with no profile: %+v %v, want GPU 0's 4g (instance 1)", pl, why)
	}

	// 1g.10gb and 1g.20gb: same milli, each goes to its own.
	ix = NewIndex(fleet(), nil, Config{})
	for _, c := range []struct {
		prof      string
		gpu, inst int
	}{{"1g.20gb", 0, 3}, {"1g.10gb", 1, 3}} {
		r := req("t"+c.prof, 142, c.prof)
		pl, why := ix.Place(&r, Pools{})
		if why != nil || gpuOf(pl.Parts[0].GPUs) != c.gpu || pl.Parts[0].MIGInstance != c.inst {
			t.Fatalf("%s share: %+v %v, want GPU %d instance %d", c.prof, pl, why, c.gpu, c.inst)
		}
	}
	r = req("u", 142, "1g.10gb")
	if _, why := ix.Place(&r, Pools{}); why == nil || why.Constraint != "mig_profile" {
		t.Fatalf("a second 1g.10gb share: %v, want none placed (the only 1g.10gb is taken; the 2g is not one)", why)
	}

	// What the table says stays: an allocation naming an instance holds
	// that instance, and a profile request sees it taken.
	a := shareAlloc("held", "n000", 1, 428)
	a.MIGInstance = 2
	ix = NewIndex(fleet(), []model.Allocation{a}, Config{})
	r = req("v", 428, "3g.40gb")
	if pl, why := ix.Place(&r, Pools{}); why != nil || gpuOf(pl.Parts[0].GPUs) != 1 || pl.Parts[0].MIGInstance != 1 {
		t.Fatalf("a 3g share beside a held 3g: %+v %v, want GPU 1 instance 1", pl, why)
	}
}

func TestMIGProfileValidation(t *testing.T) {
	s := model.Shape{GPUs: 1, Topology: model.TopologyNode, MIGProfile: "3g.40gb"}
	if err := s.Validate(""); err == nil || !strings.Contains(err.Error(), "mig_profile") || !strings.Contains(err.Error(), "gpu_milli") {
		t.Fatalf("a profile with no gpu_milli: %v, want an error naming mig_profile and gpu_milli", err)
	}
	s.GPUMilli = 428
	if err := s.Validate(""); err != nil {
		t.Fatal(err)
	}
	s.MIGProfile = "3g 40gb"
	if err := s.Validate(""); err == nil || !strings.Contains(err.Error(), "mig_profile") {
		t.Fatalf("a profile with a space: %v, want refused", err)
	}
	n := model.Node{ID: "a", GPUs: 1, MIG: [][]int{{428, 428}}, MIGProfiles: [][]string{{"3g.40gb"}}}
	if err := n.Validate(); err == nil || !strings.Contains(err.Error(), "mig_profiles") {
		t.Fatalf("one name for two instances: %v, want an error naming mig_profiles", err)
	}
	n.MIGProfiles = [][]string{{"3g.40gb", "3g.40gb"}}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A profile share fits only an instance of its profile that holds its
// milli: a free 2g beside a free 4g does not take 500m as a 2g.
func TestMIGProfileMustHoldTheShare(t *testing.T) {
	nodes := shareFleet("sharing", 0, 1, 1)
	nodes[0].MIG = [][]int{{571, 285, 142}}
	nodes[0].MIGProfiles = [][]string{{"4g.40gb", "2g.20gb", "1g.20gb"}}
	ix := NewIndex(nodes, nil, Config{})
	r := shareReq("big", 500)
	r.MIGProfile = "2g.20gb"
	if pl, why := ix.Place(&r, Pools{}); why == nil || why.Constraint != "mig_profile" {
		t.Fatalf("500m as a 2g.20gb: %+v %v, want a mig_profile reason (the 2g holds 285)", pl, why)
	}
}

// One pass places shares of two profiles of one size: the first failing
// (its profile taken) does not make the planner think the second cannot
// fit, as shapes that failed are remembered within a pass.
func TestMIGProfilesOfOneSizeAreDifferentShapes(t *testing.T) {
	nodes := shareFleet("sharing", 0, 1, 1)
	nodes[0].MIG = [][]int{{142, 142}}
	nodes[0].MIGProfiles = [][]string{{"1g.10gb", "1g.20gb"}}
	held := shareAlloc("held", "n000", 0, 142)
	held.MIGInstance = 1 // the 1g.10gb
	var jobs []*model.Job
	for i, prof := range []string{"1g.10gb", "1g.20gb"} {
		jobs = append(jobs, &model.Job{ID: "j" + prof, State: model.JobPending, SubmittedAt: benchNow.Add(time.Duration(i) * time.Second),
			Shape: model.Shape{GPUs: 1, GPUMilli: 142, MIGProfile: prof, Topology: model.TopologyNode}})
	}
	d := Plan(State{Nodes: nodes, Jobs: jobs, Allocations: []model.Allocation{held}}, benchNow)
	if len(d.Binds) != 1 || d.Binds[0].OwnerID != "j1g.20gb" {
		t.Fatalf("binds %+v, want the 1g.20gb share placed (the 1g.10gb is taken)", d.Binds)
	}
}
