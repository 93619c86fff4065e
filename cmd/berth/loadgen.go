package main

import (
	"fmt"
	"time"

	"github.com/berthsched/berth/internal/loadgen"
	"github.com/spf13/cobra"
)

func newLoadgenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "loadgen",
		Short: "Measure a running berth server over real HTTP (submit, heartbeat, bind)",
		Long: `loadgen drives a berth server through its public API. Run it against a
server you started for the purpose (it submits jobs and registers nodes):

  berth server --data-dir /tmp/lg --listen 127.0.0.1:7171 &
  berth loadgen bind      --server 127.0.0.1:7171 --token $(cat /tmp/lg/admin.token)
  berth loadgen submit    --server ... --clients 200 --requests 20000
  berth loadgen list      --server ... --query 'state=pending&limit=500'
  berth loadgen heartbeat --server ... --nodes 12500 --interval 5s --duration 60s`,
	}
	var conn connFlags
	var clients, requests, nodes, perPod, workers, samples, window int
	var interval, duration time.Duration
	var rate float64
	submit := &cobra.Command{
		Use: "submit", Short: "POST /v1/jobs from many concurrent clients", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			if err := loadgen.Register(cmd.Context(), c, nodes, perPod, 32); err != nil {
				return err
			}
			r, err := loadgen.SubmitRun(cmd.Context(), c, clients, requests, rate, window)
			out := cmd.OutOrStdout()
			loadgen.Report(out, fmt.Sprintf("submit (%d clients)", clients), r.Latency)
			fmt.Fprintf(out, "%-28s %.0f/s\n", "throughput", float64(r.Latency.N)/r.Took.Seconds())
			if r.FirstRate > 0 {
				fmt.Fprintf(out, "%-28s first %d: %.0f/s, last %d: %.0f/s (%+.0f%%)\n", "throughput by window", r.Window, r.FirstRate, r.Window, r.LastRate, 100*(r.LastRate/r.FirstRate-1))
				loadgen.Report(out, fmt.Sprintf("  the last %d", r.Window), r.LastLatency)
			}
			return err
		},
	}
	submit.Flags().IntVar(&clients, "clients", 200, "concurrent clients")
	submit.Flags().IntVar(&requests, "requests", 20000, "jobs to submit in all")
	submit.Flags().Float64Var(&rate, "rate", 0, "total submits per second, paced across the clients (0: flat out)")
	submit.Flags().IntVar(&window, "window", 0, "submits in the first and last window whose rates are compared (0: a tenth of --requests)")
	var query string
	list := &cobra.Command{
		Use: "list", Short: "GET /v1/jobs pages from many concurrent readers", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			l, n, err := loadgen.List(cmd.Context(), c, clients, duration, query)
			loadgen.Report(cmd.OutOrStdout(), fmt.Sprintf("list ?%s (%d clients)", query, clients), l)
			fmt.Fprintf(cmd.OutOrStdout(), "%-28s %d jobs a page, %.0f pages/s\n", "pages", n, float64(l.N)/duration.Seconds())
			return err
		},
	}
	list.Flags().IntVar(&clients, "clients", 8, "concurrent readers")
	list.Flags().DurationVar(&duration, "duration", 20*time.Second, "how long to read")
	list.Flags().StringVar(&query, "query", "limit=500", "the query of each GET /v1/jobs")
	conn.add(list)
	hb := &cobra.Command{
		Use: "heartbeat", Short: "Sustained heartbeats from a simulated fleet, with heartbeat-to-decision probes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			t0 := time.Now()
			if err := loadgen.Register(cmd.Context(), c, nodes, perPod, 64); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%-28s %d nodes in %s\n", "registered", nodes, time.Since(t0).Round(time.Millisecond))
			r, err := loadgen.Heartbeats(cmd.Context(), c, nodes, perPod, interval, duration, workers)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%-28s %.0f/s sustained (%d sent, %d failed, %d not sent with every sender busy, %s)\n", "heartbeats", r.Rate(), r.Sent, r.Failed, r.Dropped, r.Duration.Round(time.Millisecond))
			loadgen.Report(out, "heartbeat round trip", r.Latency)
			loadgen.Report(out, "heartbeat-to-decision lag", r.Lag)
			loadgen.Report(out, "  in the second half", r.LagLate)
			if r.LagStopped != "" {
				fmt.Fprintf(out, "%-28s %s\n", "lag probes stopped", r.LagStopped)
			}
			return nil
		},
	}
	hb.Flags().DurationVar(&interval, "interval", 5*time.Second, "each node's heartbeat interval")
	hb.Flags().DurationVar(&duration, "duration", 60*time.Second, "how long to sustain the load")
	hb.Flags().IntVar(&workers, "workers", 64, "concurrent senders")
	bind := &cobra.Command{
		Use: "bind", Short: "Submit-to-running latency on an idle cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			if err := loadgen.Register(cmd.Context(), c, nodes, perPod, 8); err != nil {
				return err
			}
			l, err := loadgen.Bind(cmd.Context(), c, samples, time.Millisecond)
			loadgen.Report(cmd.OutOrStdout(), "submit to bind (idle)", l)
			return err
		},
	}
	bind.Flags().IntVar(&samples, "samples", 200, "jobs to time")
	for _, sc := range []*cobra.Command{submit, hb, bind} {
		conn.add(sc)
		sc.Flags().IntVar(&perPod, "nodes-per-pod", 32, "nodes per pod")
	}
	submit.Flags().IntVar(&nodes, "nodes", 128, "nodes to register first")
	bind.Flags().IntVar(&nodes, "nodes", 16, "nodes to register first")
	hb.Flags().IntVar(&nodes, "nodes", 12500, "nodes to simulate")
	cmd.AddCommand(submit, hb, bind, list)
	return cmd
}
