// Package peer runs one workload live through two real schedulers side by
// side, a real Slurm and a real berth, at the same compression of time,
// and measures both from the outside the same way: what each did with
// every job (when it started, where, how often it was preempted), how
// whole the free capacity stayed, and how much inference demand went
// unserved. `berth bench slurm` is its command; docs/slurm.md says what
// it measures and BENCHMARKS.md records its figures.
//
// The harness is a driver and two adapters. The driver (drive.go) replays
// a sim.Workload in compressed real time: it submits each training job
// at its submit time and sets each service's wanted replicas at each
// demand step, and polls the system once per tick for a Snapshot. The
// Slurm adapter (slurm*.go) writes a cluster's config from the same
// fleet description berth uses (one slurmd per node, fake GPU device
// files, a topology switch per pod), starts munged, slurmctld and the
// slurmds, and speaks to it only through sbatch, scancel, squeue and
// sinfo. The berth adapter (berth.go) starts the dev stack (a real
// server on embedded etcd, one real agent per node) and speaks the
// public API. Both run the same stand-in training process (`berth
// workload train`), which checkpoints every durable interval and on
// SIGTERM and resumes from its last checkpoint, so a preemption costs
// each system the same kind of work.
//
// Nothing here is shared with the scheduling core: the harness only
// observes. The same workload goes through `berth sim` (package sim) for
// the third column, so the report also shows how far the simulator is
// from the live system.
package peer
