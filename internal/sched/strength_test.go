package sched

import "testing"

// TestFrontier: a failure covers every job no stronger on both counts;
// one point per base priority, the strongest failure kept.
func TestFrontier(t *testing.T) {
	var failed frontier
	failed.failed(strength{power: 200, base: 0}) // an old, low-priority job
	failed.failed(strength{power: 50, base: 50})
	failed.failed(strength{power: 40, base: 50}) // weaker: the 50 kept
	for _, tt := range []struct {
		s    strength
		want bool
	}{
		{strength{150, 0}, true},
		{strength{210, 0}, false},
		{strength{50, 50}, true},
		{strength{45, 20}, true}, // under the (50, 50) failure
		{strength{60, 50}, false},
		{strength{50, 60}, false}, // a higher base may preempt what the others could not
	} {
		if got := failed.covers(tt.s); got != tt.want {
			t.Errorf("failures %v cover %v: %v, want %v", failed, tt.s, got, tt.want)
		}
	}
	var many frontier
	for b := 0; b < 2*maxFrontier; b++ {
		many.failed(strength{power: 10, base: b})
	}
	if len(many) != maxFrontier {
		t.Errorf("frontier grew to %d points, want at most %d", len(many), maxFrontier)
	}
}
