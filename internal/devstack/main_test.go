package devstack

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/agent"
	"github.com/berthsched/berth/internal/workload"
)

// TestMain lets the test binary play berth: the demo runs
// `<Config.Berth> workload train|serve ...`, and the tests pass
// os.Args[0] as Config.Berth, so those processes land here and run the
// same workload code `berth workload` runs. Test flags never start with
// "workload", so a test run is never mistaken for a workload.
func TestMain(m *testing.M) {
	agent.MaybeShim()
	if len(os.Args) > 1 && os.Args[1] == "workload" {
		os.Exit(runWorkload(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// runWorkload is cmd/berth/workload.go's flag mapping, with the standard
// flag package: train takes --steps, --step-time and --checkpoint-every;
// serve takes --listen and --drain.
func runWorkload(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "workload: expected train or serve")
		return 2
	}
	kind := args[0]
	fs := flag.NewFlagSet("workload "+kind, flag.ContinueOnError)
	var err error
	switch kind {
	case "train":
		var cfg workload.TrainConfig
		fs.IntVar(&cfg.Steps, "steps", 100, "steps to run in all (across preemptions)")
		fs.DurationVar(&cfg.StepTime, "step-time", time.Second, "time one step takes")
		fs.IntVar(&cfg.CheckpointEvery, "checkpoint-every", 0, "also checkpoint every N steps")
		if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
			return 2
		}
		cfg.Out = os.Stdout
		err = workload.Train(workload.StopSignal(), cfg)
	case "serve":
		var cfg workload.ServeConfig
		fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "address to serve on")
		fs.DurationVar(&cfg.Drain, "drain", 2*time.Second, "how long requests in flight get after SIGTERM")
		if fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
			return 2
		}
		cfg.Out = os.Stdout
		err = workload.Serve(workload.StopSignal(), cfg)
	default:
		fmt.Fprintf(os.Stderr, "workload: unknown kind %q: expected train or serve\n", kind)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return workload.ExitCode(err)
}
