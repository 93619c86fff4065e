package sched

// strength is what decides which running training a waiting job may
// preempt: its preempting power (effective priority less its preemption
// bonus) and its base priority, since it preempts only work of a lower
// one (room).
type strength struct{ power, base int }

// within reports whether s is no stronger than o on either count.
func (s strength) within(o strength) bool { return s.power <= o.power && s.base <= o.base }

// maxFrontier bounds a frontier: past it, searches are not remembered
// (a queue rarely has more base priorities than this in one shape).
const maxFrontier = 16

// frontier remembers where searches for room failed for one shape, at
// most one point per base priority: the strongest that failed. One point
// was not enough: with an old job of a low priority first in the queue
// (its waiting bonus ranks it there) and thousands of newer ones of a
// higher priority behind it, a single failure point kept at the old job
// sent every later job back to search again (BenchmarkPlanAgedHead: 100k
// pending jobs on 12,500 nodes, a 9.5 s pass against 0.44 s).
type frontier []strength

// covers reports whether a failure at least as strong as s on both counts
// is remembered: s fails too.
func (f frontier) covers(s strength) bool {
	for _, e := range f {
		if s.within(e) {
			return true
		}
	}
	return false
}

// failed remembers a failure at s.
func (f *frontier) failed(s strength) {
	for i := range *f {
		if e := &(*f)[i]; e.base == s.base {
			e.power = max(e.power, s.power)
			return
		}
	}
	if len(*f) < maxFrontier {
		*f = append(*f, s)
	}
}
