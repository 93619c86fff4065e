package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// TestStalledWatchRestarts: a table watch that stays open and delivers
// nothing must not freeze a writer waiting to read its own write. The
// watchdog restarts it, the table reloads, and the commit returns.
func TestStalledWatchRestarts(t *testing.T) {
	var dropping atomic.Bool
	defer store.DropWatch(dropping.Load, time.Second)()
	logs := &lockedBuffer{}
	s, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := lead(t, s, "a", 2*time.Second)
	defer l.Resign(context.Background())
	w := l.Writer()

	dropping.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = w.Commit(ctx, w.Txn().Put(store.Jobs, "j1", model.Job{ID: "j1", State: model.JobPending}))
	dropping.Store(false)
	if err != nil {
		t.Fatalf("commit under a stalled watch: %v\nlog:\n%s", err, logs)
	}
	if _, ok := store.Get[model.Job](s.Cache(), store.Jobs, "j1"); !ok {
		t.Fatal("the commit returned but the cache lacks its job")
	}
	if !strings.Contains(logs.String(), "table watch stalled") {
		t.Fatalf("no stall logged; log:\n%s", logs)
	}
	t.Logf("commit returned %v after the watch stalled", time.Since(t0).Round(time.Millisecond))

	// The restarted watch delivers again.
	if _, err := w.Commit(ctx, w.Txn().Put(store.Jobs, "j2", model.Job{ID: "j2", State: model.JobPending})); err != nil {
		t.Fatal(err)
	}
	if strings.Count(logs.String(), "table watch stalled") != 1 {
		t.Fatalf("a healthy watch was restarted; log:\n%s", logs)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
