package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// watchFlags are -w/--watch and --interval on the list commands: the
// answer again every interval, the screen redrawn, like watch(1) or
// kubectl get -w (which prints changes; berth redraws the table whole,
// since a job's row changes in place: state, where, why pending).
type watchFlags struct {
	on       bool
	interval time.Duration
	times    int
}

func (w *watchFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&w.on, "watch", "w", false, "print it again every --interval until Ctrl-C, redrawing the screen")
	cmd.Flags().DurationVar(&w.interval, "interval", 2*time.Second, "time between redraws with --watch")
	cmd.Flags().IntVar(&w.times, "watch-times", 0, "with --watch, stop after this many (0: until Ctrl-C)")
}

// loop prints once per interval. An answer that fails is shown in place
// of the table, and the watch goes on: a failover should not end it.
func (w *watchFlags) loop(cmd *cobra.Command, once func(io.Writer) error) error {
	if w.interval < 100*time.Millisecond {
		return fmt.Errorf("--interval: %v: at least 100ms", w.interval)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := cmd.OutOrStdout()
	tty := isTerminal(out)
	for n := 1; ; n++ {
		var buf bytes.Buffer
		if err := once(&buf); err != nil {
			fmt.Fprintf(&buf, "error: %v\n", err)
		}
		head := fmt.Sprintf("every %v: berth %s    %s\n\n", w.interval, strings.Join(os.Args[1:], " "), time.Now().Format("15:04:05"))
		if tty {
			head = "\033[H\033[2J" + head // home, clear
		}
		if _, err := io.WriteString(out, head+buf.String()); err != nil {
			return err
		}
		if w.times > 0 && n >= w.times {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.interval):
		}
	}
}
