package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/server"
	"github.com/spf13/cobra"
)

func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "berth")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "berth")
	}
	return "berth-data"
}

func newServerCmd() *cobra.Command {
	var cfg server.Config
	var endpoints string
	var heartbeat, lostAfter, usageRetention, jobRetention, historyEvery time.Duration
	var logJSON bool
	var minFreeMiB uint64
	var memoryLimit int64
	var configFile string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: the API over the allocation table in etcd",
		Long: `berth server serves the /v1 API and, while it holds the leader election,
runs the control loop: watch the table, plan, apply in one fenced write.

By default it starts an embedded single-member etcd under --data-dir;
--etcd-endpoints points it at an external etcd cluster instead, and
--name/--etcd-peer-url/--initial-cluster make three berth servers one
three-member etcd cluster among themselves. Any number of servers may run:
one leads and writes; followers serve reads and forward writes. On its first
start it prints an admin token and saves it to <data-dir>/admin.token.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if endpoints != "" {
				cfg.Endpoints = strings.Split(endpoints, ",")
			}
			cfg.Logger = newLogger(cmd, logJSON)
			cfg.Control = control.Config{HeartbeatInterval: heartbeat, LostAfter: lostAfter, UsageRetention: usageRetention,
				JobRetention: jobRetention, HistoryEvery: historyEvery}
			if configFile != "" {
				if err := control.LoadFile(configFile, &cfg.Control); err != nil {
					return err
				}
				if len(cfg.Control.Quotas) > 0 {
					return fmt.Errorf("%s: quotas: the server keeps quotas in its table: set them with PUT /v1/quotas/{scope} (berth kube reads them from this file)", configFile)
				}
				// A flag given on the command line wins over the file.
				for flag, set := range map[string]func(){
					"heartbeat-interval": func() { cfg.Control.HeartbeatInterval = heartbeat },
					"lost-after":         func() { cfg.Control.LostAfter = lostAfter },
					"usage-retention":    func() { cfg.Control.UsageRetention = usageRetention },
					"job-retention":      func() { cfg.Control.JobRetention = jobRetention },
				} {
					if cmd.Flags().Changed(flag) {
						set()
					}
				}
			}
			if err := cfg.Control.CheckRetention(); err != nil {
				return errors.New("--" + strings.Replace(err.Error(), "_", "-", 2))
			}
			cfg.MinFreeDisk = minFreeMiB << 20
			setMemoryLimit(cmd.Flags().Changed("memory-limit"), memoryLimit, memlimit.FromCgroup, cfg.Logger)
			out := cmd.OutOrStdout()
			tokenFile := filepath.Join(cfg.DataDir, "admin.token")
			cfg.Bootstrap = func(secret string) {
				if err := server.SaveToken(tokenFile, secret); err != nil {
					cfg.Logger.Error("saving the admin token", "file", tokenFile, "err", err)
				}
				fmt.Fprintf(out, "admin token (shown once; saved to %s):\n  %s\n", tokenFile, secret)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			in, err := server.Start(ctx, cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "berth server on http://%s (data %s)\n", in.Addr, cfg.DataDir)
			<-ctx.Done()
			fmt.Fprintln(out, "stopping")
			return in.Stop()
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "address to serve the API on")
	f.StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "where the embedded etcd keeps the table")
	f.StringVar(&configFile, "config", "", "scheduling policy and control-loop timings, YAML (docs/config.md); validated at start")
	f.Uint64Var(&minFreeMiB, "min-free-disk-mib", server.DefaultMinFreeDisk>>20, "refuse writes (reads go on) while the data dir has less free space than this")
	f.StringVar(&endpoints, "etcd-endpoints", "", "comma-separated external etcd endpoints (instead of the embedded member)")
	f.StringVar(&cfg.Name, "name", "", "this server's member name in the embedded etcd cluster")
	f.StringVar(&cfg.Advertise, "advertise", "", "URL other servers and clients reach this one at (default: the --listen address); followers forward writes to the leader's")
	f.StringVar(&cfg.EtcdClientURL, "etcd-client-url", "", "embedded etcd client URL (default: a free loopback port)")
	f.StringVar(&cfg.EtcdPeerURL, "etcd-peer-url", "", "embedded etcd peer URL (default: a free loopback port)")
	f.StringVar(&cfg.InitialCluster, "initial-cluster", "", "embedded etcd initial cluster, name=peerURL,... (for several berth servers)")
	f.DurationVar(&cfg.ElectionTTL, "election-ttl", 10*time.Second, "leader lease: a crashed leader is replaced after this")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "and this key")
	f.DurationVar(&heartbeat, "heartbeat-interval", 5*time.Second, "how often agents are told to report")
	f.DurationVar(&lostAfter, "lost-after", 0, "silence after which a node is lost and its work requeued (default 12 heartbeat intervals)")
	f.DurationVar(&usageRetention, "usage-retention", 90*24*time.Hour, "how long finished work's usage records (berth usage) are kept")
	f.DurationVar(&jobRetention, "job-retention", 24*time.Hour, "how long a finished job stays in the table before it is compacted to its usage record")
	f.DurationVar(&historyEvery, "history-every", 30*time.Second, "how often the leader samples the fleet for the dashboard's plots (kept 6 h)")
	f.BoolVar(&logJSON, "log-json", false, "log (and audit) as JSON")
	f.Var(bytesFlag{&memoryLimit}, "memory-limit", "soft limit on the server's memory (3.5GiB, 4GB): the collector works harder near it; default: 90% of the container's (cgroup's) memory limit, or $GOMEMLIMIT; 0: none")
	return cmd
}
