package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// benchWriter opens a table in a temporary directory and leads it; the
// leadership is resigned and the table closed when the benchmark ends.
func benchWriter(b *testing.B) *store.Writer {
	b.Helper()
	s, err := store.Open(context.Background(), store.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	l, err := s.Campaign(context.Background(), "bench", 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := l.Resign(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return l.Writer()
}

// BenchmarkCommit is one job created per transaction, read back through
// the cache before Commit returns (what a submit pays), by 20 writers at
// once as the open-loop load generator sends them.
func BenchmarkCommit(b *testing.B) {
	w := benchWriter(b)
	job := model.Job{Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, State: model.JobPending,
		Team: "ml", Org: "acme", Priority: 10, SubmittedAt: time.Now()}
	var n atomic.Int64
	b.SetParallelism(10) // 20 writers on two CPUs
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("j-%d", n.Add(1))
			j := job
			j.ID = id
			if _, err := w.Commit(context.Background(), w.Txn().Create(store.Jobs, id, j)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
}

// BenchmarkCommitBinds is the transaction of a pass that binds 1,000
// 1-GPU jobs onto 125 nodes, as the control loop writes it: each bind
// conditions on its node and its job being unchanged since the pass's
// read (the job twice, once where it is loaded and once where it is
// bound), creates the allocation and rewrites the job.
func BenchmarkCommitBinds(b *testing.B) {
	w := benchWriter(b)
	const binds, nodes = 1000, 125
	seed := w.Txn()
	for i := range nodes {
		id := fmt.Sprintf("n%03d", i)
		seed.Put(store.Nodes, id, model.Node{ID: id, Pod: "p1", GPUs: 8, Health: model.HealthHealthy})
	}
	if _, err := w.Commit(context.Background(), seed); err != nil {
		b.Fatal(err)
	}
	job := model.Job{Shape: model.Shape{GPUs: 1, Topology: model.TopologyNode}, Team: "ml", Org: "acme", Priority: 10, SubmittedAt: time.Now()}
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		b.StopTimer()
		jobs := w.Txn()
		for i := range binds {
			j := job
			j.ID, j.State = fmt.Sprintf("j-%d-%d", n, i), model.JobPending
			jobs.Put(store.Jobs, j.ID, j)
		}
		rev, err := w.Commit(context.Background(), jobs)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t := w.Txn()
		for i := range binds {
			j := job
			j.ID, j.State, j.StartedAt = fmt.Sprintf("j-%d-%d", n, i), model.JobRunning, time.Now()
			node := fmt.Sprintf("n%03d", i%nodes)
			t.Unchanged(store.Nodes, node, rev).Unchanged(store.Jobs, j.ID, rev).Unchanged(store.Jobs, j.ID, rev)
			a := model.Allocation{ID: fmt.Sprintf("a-%d-%d", n, i), NodeID: node, GPUs: model.FullMask(1) << uint(i/nodes%8),
				OwnerKind: model.OwnerTraining, OwnerID: j.ID, CreatedAt: time.Now()}
			t.Put(store.Allocations, a.ID, a).Put(store.Jobs, j.ID, j)
		}
		if _, err := w.Commit(context.Background(), t); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}
