package model

import (
	"fmt"
	"slices"
	"time"
)

// ElasticStep is the unit a multi-node elastic job (`pod` or `any`)
// grows and shrinks by: one whole 8-GPU node. A multi-node gang that
// gains or loses part of a node would share that node's NVLink domain with
// a stranger and gain nothing from it; whole nodes keep every size
// shape-aligned (§6). A `node` job lives inside one NVLink domain and
// changes by single GPUs there (StepOf).
const ElasticStep = 8

// StepOf is the unit an elastic job of topology t changes size by: one
// GPU for a `node` job (it grows on its own node only), ElasticStep for
// the others.
func StepOf(t Topology) int {
	if t == TopologyNode {
		return 1
	}
	return ElasticStep
}

// Elastic says a training job runs at any allowed size between MinGPUs and
// MaxGPUs (§9.4): it starts as soon as MinGPUs fit, grows into GPUs nothing
// ranked above it wants, and is shrunk toward MinGPUs before any whole job
// is preempted.
type Elastic struct {
	MinGPUs int `json:"min_gpus"`
	MaxGPUs int `json:"max_gpus"`
	// Sizes, ascending, are the only sizes the job runs at (powers of two,
	// say, for a job whose batch must divide evenly); empty allows every
	// multiple of ElasticStep from MinGPUs to MaxGPUs.
	Sizes []int `json:"sizes,omitempty"`
}

// Resize is one change of a running elastic job's size, kept on the job.
type Resize struct {
	At   time.Time `json:"at"`
	From int       `json:"from"`
	To   int       `json:"to"`
	// Why: grow (idle GPUs), or shrink for the work that took them.
	Why string `json:"why"`
}

// MaxResizes bounds the resize history a job keeps (newest last).
const MaxResizes = 32

// Validate checks the elastic range against the job's shape; prefix names
// the enclosing field.
func (e *Elastic) Validate(prefix string, s *Shape) error {
	unit := StepOf(s.Topology)
	step := func(field string, n int) error {
		switch {
		case unit == 1 && (n < 1 || n > MaxGPUsPerNode):
			return fmt.Errorf("%s%s: %d: expected 1 to %d GPUs (a node job grows and shrinks inside its one node)", prefix, field, n, MaxGPUsPerNode)
		case unit > 1 && (n < unit || n%unit != 0):
			return fmt.Errorf("%s%s: %d: expected a positive multiple of %d (a %s elastic job grows and shrinks by whole %d-GPU nodes)", prefix, field, n, unit, s.Topology, unit)
		}
		return nil
	}
	if err := step("min_gpus", e.MinGPUs); err != nil {
		return err
	}
	if err := step("max_gpus", e.MaxGPUs); err != nil {
		return err
	}
	switch {
	case e.MinGPUs >= e.MaxGPUs:
		return fmt.Errorf("%smax_gpus: %d must be above min_gpus %d (a job of one size is not elastic)", prefix, e.MaxGPUs, e.MinGPUs)
	case s.Fraction():
		return fmt.Errorf("shape.gpu_milli: a share of one GPU cannot be elastic")
	case s.GPUs != e.MaxGPUs:
		return fmt.Errorf("shape.gpus: %d must equal %smax_gpus %d (the size the job is declared at)", s.GPUs, prefix, e.MaxGPUs)
	}
	for i, n := range e.Sizes {
		f := fmt.Sprintf("sizes[%d]", i)
		if err := step(f, n); err != nil {
			return err
		}
		if n < e.MinGPUs || n > e.MaxGPUs {
			return fmt.Errorf("%s%s: %d: expected between min_gpus %d and max_gpus %d", prefix, f, n, e.MinGPUs, e.MaxGPUs)
		}
		if i > 0 && n <= e.Sizes[i-1] {
			return fmt.Errorf("%s%s: %d: sizes must be ascending without repeats", prefix, f, n)
		}
	}
	if len(e.Sizes) > 0 && (e.Sizes[0] != e.MinGPUs || e.Sizes[len(e.Sizes)-1] != e.MaxGPUs) {
		return fmt.Errorf("%ssizes: must start at min_gpus %d and end at max_gpus %d", prefix, e.MinGPUs, e.MaxGPUs)
	}
	return nil
}

// AtMost is the largest allowed size no bigger than n, 0 when n is below
// MinGPUs; step is the job's topology's (StepOf).
func (e *Elastic) AtMost(n, step int) int {
	n = min(n, e.MaxGPUs)
	if n < e.MinGPUs {
		return 0
	}
	if len(e.Sizes) == 0 {
		return n / step * step
	}
	i, ok := slices.BinarySearch(e.Sizes, n)
	if ok {
		return e.Sizes[i]
	}
	return e.Sizes[i-1]
}

// Resized records a change of size on the job.
func (j *Job) Resized(at time.Time, from, to int, why string) {
	r := j.Resizing() // a record of its own: see RunRecord
	r.ResizedAt = at
	r.Resizes = append(slices.Clip(r.Resizes), Resize{At: at, From: from, To: to, Why: why})
	if n := len(r.Resizes); n > MaxResizes {
		r.Resizes = r.Resizes[n-MaxResizes:]
	}
	r.ResizeCount++
	j.Size, j.ResizeRecord = to, &r
}
