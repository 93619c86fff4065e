package workload

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// StopSignal is closed when the process gets SIGTERM or SIGINT: the
// agent's stop request, or Ctrl-C.
func StopSignal() <-chan struct{} {
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		close(stop)
	}()
	return stop
}

// ExitCode is the process exit status for a workload's result.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrPreempted):
		return 128 + int(syscall.SIGTERM)
	}
	return 1
}

// ResizeSignal delivers one value per SIGUSR1: the agent's notice that an
// elastic job's size changed (the new size is in $BERTH_SIZE_FILE).
func ResizeSignal() <-chan struct{} {
	out := make(chan struct{}, 1)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			select {
			case out <- struct{}{}:
			default: // one notice pending is enough: the file has the size
			}
		}
	}()
	return out
}
