// Package sim replays fleets and workloads through scheduling policies on
// a virtual clock and reports where GPUs, queue time and fragmentation go.
//
// The `berth` policy is the scheduling core itself: every pass calls
// sched.PlanOn with the same State the control loop would build, and the
// engine applies the Decision the way the control loop does (binds,
// preemptions with their deadlines, requeues, relocations, reservations).
// The package never carries a copy of scheduling logic. The comparison
// policies (static-split, first-fit, worst-fit, random, best-fit) are the
// simple baselines the design rejects, written plainly in baseline.go.
//
// Workloads come from a seeded generator of the design's fleet and mix
// (seed.go), Alibaba's openb trace (openb.go), or a documented CSV job list
// (csv.go). Malformed input fails with file:line and the field.
//
// What it must not do: read the wall clock inside a simulation (progress
// reporting aside), or depend on map iteration order: the same workload,
// policy and seed give the same report.
package sim
