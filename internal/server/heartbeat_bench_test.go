package server

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// BenchmarkHeartbeatHTTP is one node's heartbeat over real HTTP, from the
// request's encoding to the orders decoded: 500 full nodes (eight 1-GPU
// jobs each) report their work running and change nothing, as a fleet at
// work does 2,500 times a second in `berth loadgen heartbeat`. Client
// and server share the process, so a CPU profile shows both.
func BenchmarkHeartbeatHTTP(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tokens := make(chan string, 1)
	in, err := Start(ctx, Config{Listen: "127.0.0.1:0", DataDir: b.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Bootstrap: func(s string) { tokens <- s }})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := in.Stop(); err != nil {
			b.Errorf("stop: %v", err)
		}
	}()
	c := client.New(in.Addr, <-tokens)
	const nodes, per = 500, 8
	reps := make([]api.Heartbeat, nodes)
	for i := range reps {
		reps[i] = api.Heartbeat{NodeID: fmt.Sprintf("n%03d", i), BootEpoch: 1, Pod: "p1", Model: "H100", GPUs: per,
			CPUMilli: 128000, MemoryMiB: 1 << 20}
	}
	beat := func(rep api.Heartbeat) api.Orders {
		for {
			o, err := c.Heartbeat(ctx, rep)
			if err == nil {
				return o
			}
			if ctx.Err() != nil {
				b.Fatalf("heartbeat of %s: %v", rep.NodeID, err)
			}
			time.Sleep(10 * time.Millisecond) // not leading yet
		}
	}
	for _, rep := range reps {
		beat(rep)
	}
	for i := range nodes * per {
		if _, err := c.SubmitJob(ctx, api.JobRequest{Name: fmt.Sprintf("j%05d", i), GPUs: 1, Topology: "node",
			Command: []string{"python", "train.py"}}, ""); err != nil {
			b.Fatal(err)
		}
	}
	for i := range reps {
		for {
			o := beat(reps[i])
			if len(o.Allocations) == per {
				for _, a := range o.Allocations {
					reps[i].Allocations = append(reps[i].Allocations, model.ActualAlloc{ID: a.ID, State: model.ActualRunning})
				}
				break
			}
			time.Sleep(20 * time.Millisecond) // the loop is still binding
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if o := beat(reps[i%nodes]); len(o.Allocations) != per {
			b.Fatalf("orders for %s hold %d allocations, want %d", o.NodeID, len(o.Allocations), per)
		}
	}
}
