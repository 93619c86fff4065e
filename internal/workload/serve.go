package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// ServeConfig is `berth workload serve`.
type ServeConfig struct {
	Listen string
	// Drain bounds how long requests in flight get after SIGTERM.
	Drain time.Duration
	// Latency is added to every answer, standing in for a forward pass.
	Latency time.Duration
	// Load is how long the model takes to load: /healthz answers 503
	// "loading" until then, which a readiness check on it sees (R4).
	Load time.Duration
	Out  io.Writer
}

// Reply is what the stand-in replica answers.
type Reply struct {
	Deployment string `json:"deployment"`
	Replica    int    `json:"replica"`
	Alloc      string `json:"alloc"`
	GPUs       string `json:"gpus"`
	Served     int64  `json:"served"`
}

// Serve answers HTTP until stop is closed, then drains: /healthz answers
// 503 from then on, no new connections are taken, requests in flight
// finish (for up to Drain), and the process exits 0.
func Serve(stop <-chan struct{}, cfg ServeConfig) error {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Drain <= 0 {
		return fmt.Errorf("--drain: %v: expected a positive duration", cfg.Drain)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	replica, _ := strconv.Atoi(os.Getenv("BERTH_REPLICA"))
	if cfg.Load < 0 {
		return fmt.Errorf("--load-time: %v: expected 0 or more", cfg.Load)
	}
	loaded := time.Now().Add(cfg.Load)
	var served atomic.Int64
	var draining atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		if time.Now().Before(loaded) {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(cfg.Latency)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Reply{Deployment: os.Getenv("BERTH_DEPLOYMENT"), Replica: replica,
			Alloc: os.Getenv("BERTH_ALLOC_ID"), GPUs: os.Getenv("CUDA_VISIBLE_DEVICES"), Served: served.Add(1)})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	addr := ln.Addr().String()
	if dir := os.Getenv("BERTH_ALLOC_DIR"); dir != "" {
		if err := atomicWrite(filepath.Join(dir, "addr"), []byte(addr+"\n")); err != nil {
			ln.Close()
			return err
		}
	}
	fmt.Fprintf(cfg.Out, "serving on http://%s\n", addr)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-stop:
	}
	draining.Store(true)
	fmt.Fprintf(cfg.Out, "SIGTERM: draining (up to %v)\n", cfg.Drain)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Drain)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	fmt.Fprintf(cfg.Out, "drained after %d requests\n", served.Load())
	return nil
}
