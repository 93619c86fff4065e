package control

import (
	"strings"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// Admission judges a shape against the fleet as built. A heartbeat that
// changes only a node's boot identity or health must not rebuild the view
// (on 12,500 nodes that rebuild cost a submit tens of milliseconds under
// the lock every submit takes); a node that comes, or changes its GPUs,
// must.
func TestAdmissionViewFollowsTheFleetNotItsHeartbeats(t *testing.T) {
	h := newHarness(t, Config{HeartbeatInterval: 2 * time.Second})
	h.beat(report("n1", 1, 8))
	big := model.Job{ID: "big", Shape: model.Shape{GPUs: 16, Topology: model.TopologyNode}}
	err := h.ctl.Admit(big)
	if err == nil || !strings.Contains(err.Error(), "the largest node has 8 GPUs") {
		t.Fatalf("16 GPUs in one node on a fleet of one 8-GPU node: %v", err)
	}
	built := h.ctl.admit.a

	// A reboot rewrites the node (new boot epoch): admission reads
	// nothing of it.
	h.beat(report("n1", 2, 8))
	if n := h.node("n1"); n.BootEpoch != 2 {
		t.Fatalf("boot epoch %d after the reboot's heartbeat", n.BootEpoch)
	}
	if err := h.ctl.Admit(big); err == nil {
		t.Fatal("admitted after a reboot")
	}
	if h.ctl.admit.a != built {
		t.Error("a heartbeat that changed only the boot epoch rebuilt the admission view")
	}
	// Neither does an operator's drain or quarantine: admission judges a
	// shape against the fleet as built.
	for _, act := range []NodeAction{Drain, Quarantine} {
		if _, err := h.ctl.SetNode(h.ctx, "n1", act); err != nil {
			t.Fatalf("%s n1: %v", act, err)
		}
	}
	if n := h.node("n1"); !n.Draining || !n.Quarantined {
		t.Fatalf("n1 after drain and quarantine: %+v", n)
	}
	if err := h.ctl.Admit(model.Job{ID: "fits", Shape: model.Shape{GPUs: 8, Topology: model.TopologyNode}}); err != nil {
		t.Fatalf("8 GPUs on a fleet of one drained 8-GPU node: %v", err)
	}
	if h.ctl.admit.a != built {
		t.Error("a drain or quarantine rebuilt the admission view")
	}

	// A node with more GPUs arrives: the view is rebuilt and the job fits.
	h.beat(model.NodeReport{NodeID: "n2", BootEpoch: 1, Pod: "pod-a", Model: "H100", GPUs: 16, CPUMilli: 256000, MemoryMiB: 1 << 21})
	if err := h.ctl.Admit(big); err != nil {
		t.Fatalf("16 GPUs with a 16-GPU node in the fleet: %v", err)
	}
	if h.ctl.admit.a == built {
		t.Error("a new node did not rebuild the admission view")
	}

	// The 16-GPU node comes back with 8: the view follows its GPUs.
	rebuilt := h.ctl.admit.a
	h.beat(model.NodeReport{NodeID: "n2", BootEpoch: 2, Pod: "pod-a", Model: "H100", GPUs: 8, CPUMilli: 256000, MemoryMiB: 1 << 21})
	if g := h.node("n2").GPUs; g != 8 {
		t.Fatalf("n2 has %d GPUs after reporting 8", g)
	}
	if err := h.ctl.Admit(big); err == nil || h.ctl.admit.a == rebuilt {
		t.Fatalf("after n2 shrank to 8 GPUs: admit %v, view rebuilt %v", err, h.ctl.admit.a != rebuilt)
	}
}
