package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// BenchmarkHeartbeat is one node reporting its eight running allocations
// and reading back its orders, on a table of 500 full nodes: the path
// 12,500 nodes take 2,500 times a second in `berth loadgen heartbeat`,
// without the HTTP around it. Nothing in the reports changes the table,
// as on a fleet at work, so no heartbeat writes.
func BenchmarkHeartbeat(b *testing.B) {
	// A long tick: passes only when kicked (binding the jobs), not beside
	// the heartbeats timed.
	h := newHarness(b, Config{Tick: time.Minute})
	const nodes, per = 500, 8
	for i := range nodes {
		h.beat(report(fmt.Sprintf("n%03d", i), 1, per))
	}
	for i := range nodes * per {
		h.submit(trainingJob(fmt.Sprintf("j%05d", i), 1))
	}
	reps := make([]model.NodeReport, nodes)
	h.waitFor("every job bound", func() error {
		n := 0
		h.st.Cache().Read(func(v store.View) { n = v.Len(store.Allocations) })
		if n != nodes*per {
			return fmt.Errorf("%d allocations, want %d", n, nodes*per)
		}
		return nil
	})
	for i := range reps {
		rep := report(fmt.Sprintf("n%03d", i), 1, per)
		for _, a := range h.allocsOn(rep.NodeID) {
			rep.Allocations = append(rep.Allocations, model.ActualAlloc{ID: a.ID, State: model.ActualRunning})
		}
		if len(rep.Allocations) != per {
			b.Fatalf("node %s runs %d allocations, want %d", rep.NodeID, len(rep.Allocations), per)
		}
		reps[i] = rep
	}
	h.settle()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if o := h.beat(reps[i%nodes]); len(o.Allocations) != per {
			b.Fatalf("orders for %s hold %d allocations, want %d", o.NodeID, len(o.Allocations), per)
		}
	}
}
