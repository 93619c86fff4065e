// Package kube is berth's Kubernetes mode: the same scheduling core over a
// different table. The API server is the source of truth: Nodes say what
// GPUs exist (nvidia.com/gpu capacity, a leaf-switch label, the GPU
// feature labels), bound Pods say what is allocated, and Pods whose
// schedulerName is berth's are the work. Each pass reads both (from
// client-go informers while leading, source.go; with the writes it made
// and the cache has not shown yet laid over them, assume.go), builds a
// sched.State, calls sched.Plan, and applies the
// Decision: Bindings (a gang's pods all or none), Evictions with the R3
// deadline as the grace period, PodScheduled=False conditions and Events
// that carry each pending reason, and Events for pages.
//
// What it keeps itself (the reservations, the preemption budget's recent
// history, alerts already raised) lives in one ConfigMap written with a
// resourceVersion precondition, so a restart or a new leader plans from
// where the last one stopped.
//
// Fencing. client-go's leader election says who should lead, not who
// does: a deposed leader that has not noticed yet can still write. Every
// write that binds a pod is therefore fenced on the pod itself. A leader's
// fence is its Lease's transition count; before binding a pod it records
// that fence on the pod (an update that fails if the pod changed, and is
// refused if the pod already carries a higher fence), then binds with the
// pod's UID and the resourceVersion of that update as preconditions. A new
// leader fences every unbound pod it may schedule before its first pass,
// so once it has, no bind by an older leader can succeed. See
// docs/kubernetes.md for what that does and does not cover.
//
// What it must not do: decide anything. Every placement, victim, reason
// and page comes from sched.Plan, as in the server and the simulator.
package kube
