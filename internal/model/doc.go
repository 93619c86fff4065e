// Package model holds berth's domain types: nodes, GPU masks, allocations,
// requests, jobs and deployments.
//
// It owns the vocabulary every other package speaks and nothing else: no
// I/O, no clock, no scheduling decisions. Types here are plain values so the
// scheduling core can copy and compare them freely, and so the same values
// travel through the store, the API and the simulator unchanged.
package model
