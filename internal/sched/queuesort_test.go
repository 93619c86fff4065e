package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortQueueIsRankOrder: the keyed sort gives exactly the order the
// rank's comparison gives, for queues with many ties, priorities near
// the key's limit and past it, and submit times spanning a few seconds
// or the whole int64 range; and the queue permuted in place into that
// order is the sorted queue.
func TestSortQueueIsRankOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct {
		name      string
		prioSpan  int
		subSpan   int64
		tierCount int
	}{
		{"ties everywhere", 3, 5, 3},
		{"bench-like", 100, 10_000e9, 3},
		{"priorities at the key's limit", 1<<20 - 1, 1e9, 2},
		{"priorities past it", 1 << 22, 1e9, 3},
		{"submit times over all of int64", 1000, math.MaxInt64, 3},
	} {
		for _, n := range []int{100, 5000} { // sorted in place, and by order
			t.Run(fmt.Sprint(c.name, "/", n), func(t *testing.T) {
				q := make([]queued, n)
				for i := range q {
					sub := rng.Int64N(c.subSpan)
					if c.subSpan == math.MaxInt64 && rng.IntN(2) == 0 {
						sub = -sub
					}
					q[i] = queued{rank: rank{tier: int8(rng.IntN(c.tierCount)), prio: rng.IntN(c.prioSpan) - c.prioSpan/2,
						submitted: sub, id: fmt.Sprintf("j-%05d", rng.IntN(n*10))}}
					q[i].rank.id += fmt.Sprint("-", i) // ids are unique
				}
				want := slices.Clone(q)
				slices.SortFunc(want, func(a, b queued) int { return a.rank.compare(b.rank) })
				order := sortQueue(q)
				for i := range q {
					got := q[i]
					if order != nil {
						got = q[order[i]]
					}
					if got.rank != want[i].rank {
						t.Fatalf("position %d: %+v, want %+v", i, got.rank, want[i].rank)
					}
				}
				if order == nil {
					return
				}
				// The queue put in that order in place, as the pass does.
				permute(q, order)
				for i := range q {
					if q[i].rank != want[i].rank {
						t.Fatalf("permuted, position %d: %+v, want %+v", i, q[i].rank, want[i].rank)
					}
				}
			})
		}
	}
}
