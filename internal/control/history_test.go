package control

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// The fleet's samples are taken every HistoryEvery and the ones older
// than HistoryKeep are removed in the pass that writes a new one.
func TestHistoryKeepsItsWindow(t *testing.T) {
	h := newHarness(t, Config{HistoryEvery: time.Minute, HistoryKeep: 5 * time.Minute})
	h.beat(report("n1", 1, 8))
	for i := 0; i < 10; i++ {
		h.clk.Advance(time.Minute)
		h.settle()
	}
	now := h.clk.Now()
	h.waitFor("ten minutes of samples, five kept", func() error {
		var at []time.Time
		h.st.Cache().Read(func(v store.View) {
			v.Each(store.History, func(_ string, e store.Entry) {
				if s, ok := e.Obj.(model.Sample); ok {
					at = append(at, s.At)
				}
			})
		})
		cut := now.Add(-5 * time.Minute)
		for _, a := range at {
			if a.Before(cut) {
				return fmt.Errorf("a sample of %s is kept, older than %s", a, cut)
			}
		}
		if len(at) < 5 {
			return fmt.Errorf("%d samples kept, want the last 5 minutes' (at least 5)", len(at))
		}
		return nil
	})
}
