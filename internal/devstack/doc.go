// Package devstack runs all of berth in one process tree for `berth dev`
// and for tests that want the whole thing: the embedded etcd and the
// server, a fleet of real agents with fake GPUs, and real workload
// processes. With Demo it also submits a realistic mix and runs a diurnal
// autoscaler, so the dashboard is alive within seconds.
//
// Nothing here is a shortcut around the real components: agents
// authenticate with their own tokens and talk HTTP to the server, the
// autoscaler scales through the API with an autoscaler token, and the
// workloads are `berth workload` processes.
package devstack
