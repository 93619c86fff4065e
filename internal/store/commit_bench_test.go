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

// BenchmarkCommit is one job created per transaction, read back through
// the cache before Commit returns (what a submit pays), by 20 writers at
// once as the open-loop load generator sends them.
func BenchmarkCommit(b *testing.B) {
	s, err := store.Open(context.Background(), store.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := s.Campaign(context.Background(), "bench", 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	w := l.Writer()
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
	if err := l.Resign(context.Background()); err != nil {
		b.Fatal(err)
	}
}
