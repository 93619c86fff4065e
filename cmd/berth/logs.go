package main

import (
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
)

// logFlags are `job logs` and `deploy logs`' options.
type logFlags struct {
	follow  bool
	replica int
	since   string
	tail    int
	stderr  bool
}

func (f *logFlags) add(cmd *cobra.Command, replica string) {
	fl := cmd.Flags()
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing what is written until the process ends (Ctrl-C stops following)")
	fl.IntVar(&f.replica, "replica", 0, replica)
	fl.StringVar(&f.since, "since", "", "only output written in the last duration (10m, 2h) or since an RFC 3339 time, to the second")
	fl.IntVar(&f.tail, "tail", 0, "start with the last N lines (0: everything the node keeps)")
	fl.BoolVar(&f.stderr, "stderr", false, "the standard error stream instead of standard output")
}

func (f *logFlags) query() string {
	q := url.Values{}
	if f.follow {
		q.Set("follow", "true")
	}
	q.Set("replica", strconv.Itoa(f.replica))
	if f.since != "" {
		q.Set("since", f.since)
	}
	if f.tail > 0 {
		q.Set("tail", strconv.Itoa(f.tail))
	}
	if f.stderr {
		q.Set("stream", "stderr")
	}
	return q.Encode()
}

// streamLogs prints a log from path until it ends or Ctrl-C.
func streamLogs(cmd *cobra.Command, conn *connFlags, path string) error {
	c, err := conn.client()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.Stream(ctx, path, cmd.OutOrStdout()); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	return nil
}

func newJobLogsCmd(conn *connFlags) *cobra.Command {
	var f logFlags
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a job's output from the node it runs on, also after it ended while the node keeps the log",
		Long: "Print a job's standard output (--stderr: its standard error) from its latest run, read from the node's agent\n" +
			"through the server. A gang's allocations are numbered 0.. in the order `job show` lists them: --replica picks one.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := conn.client()
			if err != nil {
				return err
			}
			id, err := resolveJob(cmd.Context(), c.Do, args[0])
			if err != nil {
				return err
			}
			return streamLogs(cmd, conn, "/v1/jobs/"+url.PathEscape(id)+"/logs?"+f.query())
		},
	}
	f.add(cmd, "which allocation of a gang (0 is the first node)")
	return cmd
}

func newDeployLogsCmd(conn *connFlags) *cobra.Command {
	var f logFlags
	cmd := &cobra.Command{
		Use:   "logs DEPLOYMENT",
		Short: "Print one replica's output from the node it runs on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return streamLogs(cmd, conn, "/v1/deployments/"+url.PathEscape(args[0])+"/logs?"+f.query())
		},
	}
	f.add(cmd, "which replica")
	return cmd
}
