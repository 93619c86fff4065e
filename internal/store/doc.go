// Package store keeps berth's allocation table in etcd: nodes, jobs,
// deployments, allocations, quotas, alerts, tokens and the scheduler's
// own documents (reservations, relocations, recent preemptions), each a
// JSON value under one key.
//
// The table is the source of truth (§8): everything a server knows is
// rebuilt from it on start, and a watch keeps an in-memory copy (Cache)
// current. Writes go through a Writer, which exists only while its owner
// holds the leader election: every write is one etcd transaction
// conditional on the election key's create revision, the fence (§5
// decision 1, d11). A writer that lost the election has its writes
// refused by etcd itself, never applied.
//
// By default the store starts an embedded etcd member in process and
// talks to it through etcd's in-process client (v3client): the same
// clientv3 API, calling the member's request handlers directly instead of
// over gRPC on a loopback socket. Through the socket, every submit,
// heartbeat write and watch event was encoded, written, read and decoded
// twice; at 200 submits a second beside 100k jobs that was over a quarter
// of the server's CPU (BENCHMARKS.md, "Round fifteen"). Given endpoints,
// the store talks to an external cluster through the gRPC client.
//
// It must not import the scheduling core or anything above it: values of
// the scheduler's own kinds are kept as raw JSON for the caller to decode.
package store
