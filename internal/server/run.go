package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/atomicfile"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is `berth server`'s configuration.
type Config struct {
	Listen    string // host:port
	DataDir   string
	Endpoints []string // external etcd; empty = embedded
	// Embedded etcd member settings (for HA among berth servers).
	Name, EtcdClientURL, EtcdPeerURL, InitialCluster, ClusterState string
	ElectionTTL                                                    time.Duration
	TLSCert, TLSKey                                                string
	// Advertise is the URL other servers and clients reach this one at
	// (default: the listen address, with the hostname if it listens on
	// all interfaces). It is this server's identity in the election, so
	// followers know where to forward writes.
	Advertise string
	Control   control.Config
	Logger    *slog.Logger
	// Ready is called with the bound address once serving.
	Ready func(addr string)
	// Bootstrap receives the first admin token when this server made it.
	Bootstrap func(secret string)
	// MinFreeDisk is the data dir's reserve (disk.go); 0 is the default.
	MinFreeDisk uint64
}

// Instance is a running server: for tests and `berth dev`.
type Instance struct {
	*Server
	Store      *store.Store
	Controller *control.Controller
	Addr       string
	httpSrv    *http.Server
	done       chan error
	cancel     context.CancelFunc
	log        *slog.Logger
}

// Start opens the store, starts serving and campaigning, and returns once
// the listener is bound. Stop (or ctx) ends it.
func Start(ctx context.Context, cfg Config) (*Instance, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ElectionTTL == 0 {
		cfg.ElectionTTL = 10 * time.Second
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7070"
	}
	st, err := store.Open(ctx, store.Config{Endpoints: cfg.Endpoints, DataDir: cfg.DataDir, Name: cfg.Name,
		ClientURL: cfg.EtcdClientURL, PeerURL: cfg.EtcdPeerURL, InitialCluster: cfg.InitialCluster,
		ClusterState: cfg.ClusterState, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	addr := ln.Addr().String()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	cc := cfg.Control
	cc.Logger, cc.Metrics = cfg.Logger, m
	ctl := control.New(st, cc)
	id := advertise(cfg, addr)
	o := Options{ID: id, Addr: addr, Logger: cfg.Logger, ForwardTimeout: max(cfg.ElectionTTL/2, 500*time.Millisecond), MinFreeDisk: cfg.MinFreeDisk}
	if len(cfg.Endpoints) == 0 {
		o.DataDir = cfg.DataDir
	}
	srv := New(st, ctl, reg, m, o)
	m.Observe(srv)
	ictx, cancel := context.WithCancel(ctx)
	in := &Instance{Server: srv, Store: st, Controller: ctl, Addr: addr, cancel: cancel, done: make(chan error, 2), log: cfg.Logger,
		httpSrv: &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			cancel()
			ln.Close()
			st.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		in.httpSrv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, in.httpSrv.TLSConfig)
	}
	go func() {
		err := in.httpSrv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		in.done <- err
	}()
	go srv.watchDisk(ictx)
	go srv.watchCandidates(ictx)
	go func() { in.done <- srv.Lead(ictx, cfg.ElectionTTL, cfg.Bootstrap) }()
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}
	return in, nil
}

// Stop shuts the server down: HTTP, the loop (resigning leadership so a
// follower takes over at once), the store.
func (in *Instance) Stop() error {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := in.httpSrv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Requests still in flight after the grace (a slow etcd, a
		// client that never reads): close their connections. A stop that
		// had to cut them is still a stop.
		in.log.Warn("requests still in flight after 5s: closing their connections")
		err = in.httpSrv.Close()
	}
	in.cancel()
	for i := 0; i < 2; i++ {
		if e := <-in.done; e != nil && err == nil {
			err = e
		}
	}
	return errors.Join(err, in.Store.Close())
}

// SaveToken writes a token to a file only its owner can read.
func SaveToken(path, secret string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// Whole or not at all: a script (or a test) that waits for the file
	// must never read it empty or cut short.
	return atomicfile.Write(path, []byte(strings.TrimSpace(secret)+"\n"), 0o600)
}

// advertise is the server's URL as others reach it.
func advertise(cfg Config, addr string) string {
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	adv := cfg.Advertise
	if adv == "" {
		host, port, _ := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if h, err := os.Hostname(); err == nil {
				host = h
			}
		}
		adv = net.JoinHostPort(host, port)
	}
	if !strings.Contains(adv, "://") {
		adv = scheme + "://" + adv
	}
	return strings.TrimRight(adv, "/")
}
