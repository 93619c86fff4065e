// Package ha holds berth's high-availability tests: real `berth server`
// processes that form a three-member etcd cluster among themselves, real
// node agents, real workloads, and faults injected the way they happen
// (kill -9, SIGSTOP). There is no production code here; the behaviour under
// test lives in store (fenced writes, Sync), control (the loop) and server
// (forwarding, consistent reads).
package ha
