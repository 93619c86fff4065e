// Package control is the leader's loop and reconciler (§5, §8, R5): it
// watches the table, builds the scheduler's State, runs sched.Plan and
// applies the Decision in one fenced transaction. It also owns what the
// pure core cannot: heartbeat liveness (suspect, then lost after a grace,
// with a guard against mass unreachability), preemption deadlines (stop,
// then kill, then release only when the agent confirms the exit), boot
// epochs (a new epoch invalidates the node's allocations), quarantine on
// GPU faults, and the table writes the API asks for.
//
// It runs only while its process leads. Every write carries the fence;
// conflicting writes (a job cancelled while a pass bound it) fail their
// transaction's conditions and the pass is simply run again: the loop is
// level-triggered, so a lost or refused write costs a delay, never drift.
//
// It must not do HTTP or know wire formats: the server translates.
package control
