// Package loadgen drives a running berth server over real HTTP to measure
// the control plane: submit latency under many concurrent clients,
// sustained heartbeats from a large simulated fleet with the
// heartbeat-to-decision lag measured by probes, and submit-to-bind latency
// on an idle cluster. `berth loadgen` is its command; BENCHMARKS.md
// records its figures.
//
// It speaks only the public API through package client, so what it
// measures is what agents and users see.
package loadgen
