package model

import (
	"fmt"
	"strings"
	"time"
)

// Workload is what a node agent runs for an allocation: a command (or an
// image, for runtimes that take one) and its environment. The scheduling
// core never reads it.
type Workload struct {
	Image   string            `json:"image,omitempty"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Readiness says when an inference replica serves (R4); without one
	// it serves once its process runs.
	Readiness *Readiness `json:"readiness,omitempty"`
}

// Readiness is a replica's readiness check: an HTTP GET (a path, asked of
// the address the workload writes to $BERTH_ALLOC_DIR/addr, or a full
// http:// URL) that answers 2xx or 3xx, or a command that exits 0.
type Readiness struct {
	HTTP    string   `json:"http,omitempty"`
	Command []string `json:"command,omitempty"`
}

// Validate checks the check; prefix names the enclosing field.
func (r *Readiness) Validate(prefix string) error {
	switch {
	case r.HTTP != "" && len(r.Command) > 0:
		return fmt.Errorf("%sreadiness: set http or command, not both", prefix)
	case r.HTTP == "" && len(r.Command) == 0:
		return fmt.Errorf("%sreadiness: set http (a path like /healthz, or an http:// URL) or command", prefix)
	case r.HTTP != "" && !strings.HasPrefix(r.HTTP, "/") && !strings.HasPrefix(r.HTTP, "http://") && !strings.HasPrefix(r.HTTP, "https://"):
		return fmt.Errorf("%sreadiness.http: %q: expected a path (/healthz) or an http:// URL", prefix, r.HTTP)
	case len(r.HTTP) > 1024:
		return fmt.Errorf("%sreadiness.http: at most 1024 characters", prefix)
	case len(r.Command) > 0 && r.Command[0] == "":
		return fmt.Errorf("%sreadiness.command: the program must not be empty", prefix)
	}
	return nil
}

// Validate checks the workload; prefix names the enclosing field.
func (w *Workload) Validate(prefix string) error {
	if w.Image == "" && len(w.Command) == 0 {
		return fmt.Errorf("%scommand: set command or image", prefix)
	}
	if len(w.Command) > 0 && w.Command[0] == "" {
		return fmt.Errorf("%scommand[0]: the program must not be empty", prefix)
	}
	if len(w.Command) > MaxArgs {
		return fmt.Errorf("%scommand: %d arguments: at most %d", prefix, len(w.Command), MaxArgs)
	}
	for i, a := range w.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%scommand[%d]: contains a NUL byte, which no program argument can hold", prefix, i)
		}
	}
	if len(w.Image) > 512 || strings.HasPrefix(w.Image, "-") || strings.ContainsFunc(w.Image, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%simage: %q: expected an image reference (registry/name:tag, at most 512 characters, not beginning with '-', no spaces or control characters)", prefix, w.Image)
	}
	if len(w.Env) > MaxEnv {
		return fmt.Errorf("%senv: %d variables: at most %d", prefix, len(w.Env), MaxEnv)
	}
	for k, v := range w.Env {
		if !envName(k) {
			return fmt.Errorf("%senv: %q: expected a variable name (letters, digits and '_', not beginning with a digit, at most 255)", prefix, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%senv.%s: contains a NUL byte, which no environment value can hold", prefix, k)
		}
	}
	if w.Readiness != nil {
		return w.Readiness.Validate(prefix)
	}
	return nil
}

// MaxArgs and MaxEnv bound a workload's command and environment.
const (
	MaxArgs = 4096
	MaxEnv  = 1024
)

func envName(k string) bool {
	if k == "" || len(k) > 255 || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Event is one step of a job's lifecycle, for `job show`.
type Event struct {
	At     time.Time `json:"at"`
	Event  string    `json:"event"`
	Detail string    `json:"detail,omitempty"`
}

// MaxHistory caps a job's history; older events are dropped first.
const MaxHistory = 32

// Record appends an event to the job's history, dropping the oldest past
// MaxHistory.
func (j *Job) Record(at time.Time, event, detail string) {
	j.History = append(j.History, Event{At: at, Event: event, Detail: detail})
	if n := len(j.History); n > MaxHistory {
		j.History = append([]Event(nil), j.History[n-MaxHistory:]...)
	}
}

// Terminal reports whether the job has reached an end state.
func (s JobState) Terminal() bool {
	return s == JobCompleted || s == JobFailed || s == JobCancelled
}
