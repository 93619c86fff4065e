package sim

import (
	"container/heap"
	"time"
)

type eventKind int

const (
	evArrive   eventKind = iota // a job is submitted
	evFinish                    // a running job completes (if gen still matches)
	evDemand                    // a service's wanted replicas change
	evCheck                     // 60 s after a demand increase: was it met?
	evRelocate                  // a relocated replica is ready; drain the old one
	evReady                     // a replica's model has loaded (if gen still matches)
	evStorage                   // a checkpoint write may have completed (if gen still matches)
	evKill                      // a preemption's deadline passed (if stopGen still matches)
	evSample                    // record the time series
	evDurable                   // running jobs' durable checkpoints are reported
	evPass                      // a periodic scheduling pass while work waits
)

type event struct {
	at   time.Duration
	seq  int // ties break in insertion order: runs are repeatable
	kind eventKind
	a, b int // job or service index, and a generation or demand index
	c    int // a replica's generation (evReady)
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (r *run) schedule(at time.Duration, kind eventKind, a, b int) { r.schedule3(at, kind, a, b, 0) }

func (r *run) schedule3(at time.Duration, kind eventKind, a, b, c int) {
	if kind != evSample && kind != evPass && kind != evDurable {
		r.real++
	}
	r.seq++
	heap.Push(&r.events, event{at: at, seq: r.seq, kind: kind, a: a, b: b, c: c})
}
