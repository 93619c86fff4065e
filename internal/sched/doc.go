// Package sched is berth's scheduling core: a pure function from a snapshot
// of the fleet and the time to a Decision, returned as data.
//
// It owns placement over topology-connected free sets (§6, R1), shape pools,
// largest_placeable and fragmentation, defragmentation proposals (R4), the
// order of work (inference first, training by effective priority with
// aging), gang reservations that hold across passes in a total order (R2),
// backfill, hierarchical quotas with borrowing, who yields and in what
// order (§7), the preemption budget with its priced pages (R6), checkpoint
// deadlines and the storage guard (R3), admission, and the typed reason
// every unplaced request carries. The server's control loop and the
// simulator both call Plan; neither carries a copy of its logic.
//
// What it must not do: read the clock, do I/O, log, start goroutines or use
// global randomness. Time comes in as an argument, effects go out as a
// Decision, and the same input always yields the same output. Applying a
// Decision (binding, signalling a preemption, requeueing a job that exited
// with preempt_count + 1, persisting reservations) is the caller's job.
//
// Placement walks an Index: per (pool, GPU model, node size) group, per pod,
// nodes bucketed by (free GPU count, shape affinity) in bitsets, with pod and
// group totals kept up to date on every change. Finding the R1 best node is
// a handful of first-set-bit queries, not a scan of the fleet; the tests keep
// a naive linear scan as the reference the index must agree with. Gangs and
// what-if searches (victims, backfill) are tentative transactions on the
// index: a journal of assigns and releases, rolled back to a checkpoint.
//
// The bitset and the journal are written here rather than taken from a
// library: they are a few dozen lines each, and what they must do (first
// set bit across a two-level summary; undo in reverse order) is narrower
// than any general container.
package sched
