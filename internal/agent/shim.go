package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

// The shim sits between the agent and each workload, as conmon does for
// podman: it is the workload's parent, so the exit status has somewhere
// to go when the agent is not there (killed, upgraded, restarting), and
// it writes that status to the allocation directory for whichever agent
// incarnation asks next. It holds no pipe: the workload writes its logs
// to files it holds itself, so nothing it does fails when the agent
// dies. The shim is this binary run again with shimEnv set (the reexec
// pattern), so there is nothing extra to install on a node.
const shimEnv = "BERTH_AGENT_SHIM"

// statusFile is where the shim writes the workload's exit status.
const statusFile = ".berth-status"

// shimStatus is the shim's record of how the workload ended.
type shimStatus struct {
	ExitCode int `json:"exit_code"`
	// Error says why the workload did not start (a command not found, an
	// image that could not be pulled).
	Error string `json:"error,omitempty"`
	// OOMKilled: the kernel killed the container for exceeding its
	// memory limit.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Removed: the shim removed the container it ran.
	Removed bool `json:"removed,omitempty"`
}

// MaybeShim runs the shim and exits when this process was started as one;
// otherwise it returns at once. Every binary that runs an agent calls it
// first thing in main (tests in TestMain).
func MaybeShim() {
	dir, ok := os.LookupEnv(shimEnv)
	if !ok {
		return
	}
	os.Exit(runShim(dir, os.Args[1:]))
}

// runShim starts args[0] with the rest of the environment and the shim's
// own stdio (the agent's log files), waits, and records the status. The
// shim is its process group's leader: a group signal reaches it too, and
// it catches the ones that stop workloads so that it outlives the
// workload it reports on, and SIGUSR1, an elastic job's resize notice (a caught signal is reset to its default for the
// child by exec, an ignored one would not be).
func runShim(dir string, args []string) int {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE, syscall.SIGUSR1)
	os.Unsetenv(shimEnv)
	record := func(st shimStatus) int {
		b, _ := json.Marshal(st)
		_ = writeFileSync(filepath.Join(dir, statusFile), append(b, '\n'))
		return st.ExitCode
	}
	if sp, ok := readContainerSpec(dir); ok {
		return record(runContainer(sp))
	}
	if len(args) == 0 {
		return record(shimStatus{ExitCode: 126, Error: "shim: no command"})
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		fmt.Fprintf(os.Stderr, "[berth agent] failed to start: %v\n", err)
		return record(shimStatus{ExitCode: code, Error: err.Error()})
	}
	_ = cmd.Wait()
	return record(shimStatus{ExitCode: exitCode(cmd.ProcessState)})
}

// readShimStatus is the status the shim recorded, if it did.
func readShimStatus(dir string) (shimStatus, bool) {
	b, err := os.ReadFile(filepath.Join(dir, statusFile))
	if err != nil {
		return shimStatus{}, false
	}
	var st shimStatus
	if json.Unmarshal(b, &st) != nil {
		return shimStatus{}, false
	}
	return st, true
}
