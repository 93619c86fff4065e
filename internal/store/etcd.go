package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config says where the table lives.
type Config struct {
	// Endpoints of an external etcd cluster. Empty starts an embedded
	// member with its data under DataDir.
	Endpoints []string
	DataDir   string
	// Name, ClientURL, PeerURL and InitialCluster configure the embedded
	// member; empty URLs pick free loopback ports.
	Name           string
	ClientURL      string
	PeerURL        string
	InitialCluster string
	// ClusterState is "new" (default) or "existing".
	ClusterState string
	// Prefix roots every key; default "/berth/".
	Prefix string
	Logger *slog.Logger
	// DialTimeout bounds connecting to etcd; default 5 s.
	DialTimeout time.Duration
}

// Store is a connection to the table plus its watched in-memory copy.
type Store struct {
	cli       *clientv3.Client
	endpoints []string // etcd's client URLs, for other programs
	etcd      *embed.Etcd
	prefix    string
	log       *slog.Logger
	cache     *Cache
	cancel    context.CancelFunc
	done      chan struct{}
}

// Open connects to (or starts) etcd, loads the table and starts watching it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "/berth/"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	s := &Store{prefix: cfg.Prefix, log: cfg.Logger}
	endpoints := cfg.Endpoints
	if len(endpoints) == 0 {
		e, err := startEmbedded(cfg)
		if err != nil {
			return nil, err
		}
		s.etcd = e
		for _, u := range e.Config().AdvertiseClientUrls {
			endpoints = append(endpoints, u.String())
		}
	}
	var cli *clientv3.Client
	if s.etcd != nil {
		// In process: no socket, no gRPC encoding (see the package doc).
		// The member still serves its client URL, for tools.
		// clientv3.WithRequireLeader rides in gRPC metadata and does not
		// reach the member this way: a member cut off from its raft
		// leader keeps this server's watches open instead of ending
		// them. Leadership still ends with the lease (keepalives fail,
		// the session expires), writes are fenced as ever, and the
		// watchdog restarts a watch that falls behind a committed write.
		cli = v3client.New(s.etcd.Server)
	} else {
		var err error
		cli, err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: cfg.DialTimeout,
			Logger: zap.NewNop(), MaxCallSendMsgSize: maxRequestBytes, MaxCallRecvMsgSize: 256 << 20})
		if err != nil {
			return nil, fmt.Errorf("etcd %s: %w", strings.Join(endpoints, ","), err)
		}
	}
	s.cli, s.endpoints = cli, endpoints
	s.cache = newCache()
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	rev, err := s.load(ctx, cfg.DialTimeout*2)
	if err != nil {
		cancel()
		cli.Close()
		s.closeEtcd()
		return nil, fmt.Errorf("loading the table from etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	go s.watch(wctx, rev)
	return s, nil
}

// maxRequestBytes lets one decision's transaction be large: a pass that
// binds thousands of jobs is one atomic write.
const maxRequestBytes = 64 << 20

// startEmbedded starts the member. A port this process picked itself
// (no client or peer URL configured) can be taken by another process
// between the pick and etcd's bind: the start is then tried again on
// fresh ports, a few times, where it used to fail the server (and, with
// tests starting servers side by side, a CI run).
func startEmbedded(cfg Config) (*embed.Etcd, error) {
	for attempt := 1; ; attempt++ {
		e, err := startEmbeddedOnce(cfg)
		picked := cfg.ClientURL == "" || cfg.PeerURL == ""
		if err == nil || !picked || attempt == 5 || !addrInUse(err) {
			return e, err
		}
		cfg.Logger.Warn("embedded etcd: a picked port was taken before etcd bound it; picking again", "err", err)
	}
}

func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func startEmbeddedOnce(cfg Config) (*embed.Etcd, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("store: data dir: required for the embedded etcd")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	ec := embed.NewConfig()
	ec.Dir = filepath.Join(cfg.DataDir, "etcd")
	ec.Name = cfg.Name
	if ec.Name == "" {
		ec.Name = "berth"
	}
	ec.Logger, ec.LogLevel = "zap", "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(cfg.Logger))
	ec.MaxTxnOps = 1 << 20
	ec.MaxRequestBytes = maxRequestBytes
	ec.QuotaBackendBytes = 8 << 30
	ec.AutoCompactionMode, ec.AutoCompactionRetention = "periodic", "1h"
	clientURL, peerURL := cfg.ClientURL, cfg.PeerURL
	var err error
	if clientURL == "" {
		if clientURL, err = pickURL(); err != nil {
			return nil, err
		}
	}
	if peerURL == "" {
		if peerURL, err = pickURL(); err != nil {
			return nil, err
		}
	}
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, fmt.Errorf("client url %q: %w", clientURL, err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return nil, fmt.Errorf("peer url %q: %w", peerURL, err)
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = ec.Name + "=" + pu.String()
	}
	if cfg.ClusterState != "" {
		ec.ClusterState = cfg.ClusterState
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", ec.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("embedded etcd: not ready after 60 s (are the other members up?)")
	}
}

// pickURL picks the member's ports; tests replace it to make a pick lose
// the race for its port.
var pickURL = freeURL

// freeURL picks a free loopback port. Another process may take it before
// etcd binds (startEmbedded then picks again).
func freeURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return "http://" + l.Addr().String(), nil
}

// Client is the etcd client, for tests and for tools that need the raw
// table.
func (s *Store) Client() *clientv3.Client { return s.cli }

// Endpoints are etcd's client URLs: the embedded member's, or the
// external cluster's. This server's own client needs none (it reaches
// the embedded member in process); other programs do.
func (s *Store) Endpoints() []string { return slices.Clone(s.endpoints) }

// Cache is the watched in-memory copy of the table.
func (s *Store) Cache() *Cache { return s.cache }

// Close stops the watch, the client and the embedded member.
func (s *Store) Close() error {
	s.cancel()
	<-s.done
	err := s.cli.Close()
	if s.etcd != nil && errors.Is(err, context.Canceled) {
		// The in-process client has no connection to close: Close
		// reports its own context, which it has just cancelled.
		err = nil
	}
	s.closeEtcd()
	return err
}

func (s *Store) closeEtcd() {
	if s.etcd != nil {
		s.etcd.Close()
	}
}

// Sync waits until the cache has everything etcd had committed when Sync
// was called: a quorum read for the current revision, then the watch
// catching up to it. A read served after Sync is linearizable, whichever
// server serves it and however far its watch had fallen behind.
func (s *Store) Sync(ctx context.Context) error {
	resp, err := s.cli.Get(ctx, s.prefix+"sync", clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	rev := resp.Header.Revision
	for {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := s.cache.WaitRev(wctx, rev)
		cancel()
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		// Revisions outside the prefix (a shared etcd) reach the watch
		// only as progress notifications: ask for one now.
		_ = s.cli.RequestProgress(clientv3.WithRequireLeader(ctx))
	}
}

// Unavailable reports whether err means etcd could not answer (no quorum,
// no raft leader, a timeout) rather than refusing the request.
func Unavailable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrNoLeader),
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost),
		errors.Is(err, rpctypes.ErrLeaderChanged), errors.Is(err, rpctypes.ErrGRPCNoLeader):
		return true
	}
	if strings.Contains(err.Error(), "raft proposal dropped") {
		return true // a leader transfer or election under way: no gRPC code for it
	}
	return status.Code(errors.Unwrap(err)) == codes.Unavailable || status.Code(err) == codes.Unavailable
}
