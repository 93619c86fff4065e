// Command berth is the one binary of berth, the GPU fleet scheduler that
// shares one pool of GPUs between gang-scheduled training and elastic
// inference. This package is wiring only: each subcommand hands its flags
// to an internal package.
package main

import (
	"fmt"
	"os"

	"github.com/berthsched/berth/internal/agent"
)

func main() {
	// A workload's shim is this binary run again (internal/agent/shim.go).
	agent.MaybeShim()
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "berth:", err)
		os.Exit(1)
	}
}
