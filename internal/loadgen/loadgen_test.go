package loadgen_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/loadgen"
	"github.com/berthsched/berth/internal/server"
)

// TestAgainstRealServer runs every load shape briefly against a real
// server, so that the figures in BENCHMARKS.md come from code that works.
func TestAgainstRealServer(t *testing.T) {
	ctx := context.Background()
	secret := make(chan string, 1)
	in, err := server.Start(ctx, server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Control:   control.Config{HeartbeatInterval: time.Second, Tick: 50 * time.Millisecond},
		Bootstrap: func(s string) { secret <- s }})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	var token string
	select {
	case token = <-secret:
	case <-time.After(30 * time.Second):
		t.Fatal("no bootstrap token")
	}
	c := client.New(in.Addr, token)
	if err := loadgen.Register(ctx, c, 4, 2, 2); err != nil {
		t.Fatal(err)
	}
	b, err := loadgen.Bind(ctx, c, 3, 2*time.Millisecond)
	if err != nil || b.N != 3 || b.P99 <= 0 {
		t.Fatalf("bind: %v %v", b, err)
	}
	s, _, err := loadgen.Submit(ctx, c, 5, 20, 0)
	if err != nil || s.N != 20 {
		t.Fatalf("submit: %v %v", s, err)
	}
	h, err := loadgen.Heartbeats(ctx, c, 4, 2, 200*time.Millisecond, 3*time.Second, 4)
	if err != nil || h.Sent < 20 || h.Failed != 0 || h.Dropped != 0 {
		t.Fatalf("heartbeats: sent %d failed %d dropped %d: %v", h.Sent, h.Failed, h.Dropped, err)
	}
	if h.Lag.N == 0 {
		t.Fatal("no lag probe completed")
	}
}
