// Package sched is berth's scheduling core: a pure function from a snapshot
// of the fleet and the time to a Decision, returned as data.
//
// It owns placement over topology-connected free sets (§6, R1), shape pools,
// largest_placeable and fragmentation, defragmentation proposals (R4) and
// the typed reason every unplaced request carries. The server's control
// loop and the simulator both call Plan; neither carries a copy of its logic.
//
// What it must not do: read the clock, do I/O, log, start goroutines or use
// global randomness. Time comes in as an argument, effects go out as a
// Decision, and the same input always yields the same output.
//
// Placement walks an Index: per (pool, GPU model, node size) group, per pod,
// nodes bucketed by (free GPU count, shape affinity) in bitsets, with pod and
// group totals kept up to date on every change. Finding the R1 best node is
// a handful of first-set-bit queries, not a scan of the fleet; the tests keep
// a naive linear scan as the reference the index must agree with.
package sched
