package model

import (
	"fmt"
	"time"
)

// Workload is what a node agent runs for an allocation: a command (or an
// image, for runtimes that take one) and its environment. The scheduling
// core never reads it.
type Workload struct {
	Image   string            `json:"image,omitempty"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Validate checks the workload; prefix names the enclosing field.
func (w *Workload) Validate(prefix string) error {
	if w.Image == "" && len(w.Command) == 0 {
		return fmt.Errorf("%scommand: set command or image", prefix)
	}
	for k := range w.Env {
		if k == "" {
			return fmt.Errorf("%senv: variable names must not be empty", prefix)
		}
	}
	return nil
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
