// Package workload holds berth's stand-in workloads: real processes that
// behave the way the agent's contract expects of training and inference,
// for `berth dev`, demos and the agent's tests.
//
// The contract (docs/agent.md): a training process checkpoints when it
// gets SIGTERM, within its deadline, writes the checkpoint's path to
// $BERTH_ALLOC_DIR/checkpoint, and resumes from $BERTH_RESTORE when set.
// An inference replica stops taking new requests on SIGTERM and exits
// once the requests in flight are answered.
package workload
