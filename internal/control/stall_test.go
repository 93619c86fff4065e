package control

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// passCount is an Observer that counts planning passes.
type passCount struct {
	mu     sync.Mutex
	passes int
}

func (o *passCount) PlanDone(time.Duration)         {}
func (o *passCount) ApplyDone(time.Duration, error) {}
func (o *passCount) HeartbeatLag(time.Duration)     {}
func (o *passCount) BindsDeferred(int)              {}
func (o *passCount) PassDone(time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.passes++
}

func (o *passCount) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.passes
}

// TestFullFleetPassesOncePerTick: with every GPU taken, submits that only
// lengthen the queue get a pass a tick, not one each (each would decide
// nothing). A node that joins, or a heartbeat that frees GPUs, still gets
// its pass at once, well inside the tick.
func TestFullFleetPassesOncePerTick(t *testing.T) {
	const tick = time.Second
	obs := &passCount{}
	h := newHarness(t, Config{Tick: tick, Metrics: obs})
	a := runOn(h, "n1", map[string]int{"busy": 8})["busy"]
	h.beat(report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualRunning}))
	h.submit(trainingJob("a-first", 8))
	h.settle()

	before, start := obs.count(), time.Now()
	for i := 0; time.Since(start) < 3*tick; i++ {
		h.submit(trainingJob(fmt.Sprintf("q%d", i), 8))
		time.Sleep(10 * time.Millisecond)
	}
	passes, took := obs.count()-before, time.Since(start)
	if most := int(took/tick) + 3; passes > most {
		t.Errorf("%d passes in %v of submits to a full fleet; want at most %d (one a %v tick)", passes, took.Round(time.Millisecond), most, tick)
	}
	if least := int(took/tick) - 1; passes < least {
		t.Errorf("%d passes in %v of submits to a full fleet; want at least %d (one a %v tick)", passes, took.Round(time.Millisecond), least, tick)
	}

	// Queued at one clock instant, the jobs rank by id: a-first, then q0.
	boundSoon := func(id, after string, beat model.NodeReport) {
		t.Helper()
		h.settle()
		t0 := time.Now()
		h.beat(beat)
		for h.job(id).State != model.JobRunning {
			if time.Since(t0) > waitLimit {
				t.Fatalf("%s never ran; pending reason %s", id, h.pendingReason(id))
			}
			time.Sleep(5 * time.Millisecond)
		}
		if lag := time.Since(t0); lag > tick/2 {
			t.Errorf("%s was bound %v after %s; want it before the tick's rest (%v) ran out", id, lag.Round(time.Millisecond), after, tick)
		}
	}
	boundSoon("a-first", "a node joined", report("n2", 1, 8))
	boundSoon("q0", "the heartbeat that freed n1", report("n1", 1, 8, model.ActualAlloc{ID: a.ID, State: model.ActualExited}))
}
