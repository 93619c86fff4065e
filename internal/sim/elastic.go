package sim

import (
	"math"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// Elastic training in the simulator (§9.4), with a stated model:
//
//   - Speed: a job's Work is measured at its declared (maximum) size; at
//     n GPUs it runs at (n/max)^ElasticScaling of that speed. 1 (the
//     default) is linear scaling, the same GPU-hours at any size; below 1
//     is the usual sublinear data-parallel scaling, which favours running
//     small. Rigid jobs always run at speed 1.
//   - A resize (grow or shrink) costs what a preemption costs, paid by the
//     whole job: every worker stops at a checkpoint written through the
//     shared storage (during which nothing progresses and every GPU of the
//     job, old and new, is held), then restarts at the new size in the
//     restart time drawn for preemptions (60-120 s by default). A
//     checkpoint that misses its deadline loses the progress since the
//     last durable one. All of it is counted in LostGPUHours.
//   - A shrink gives up its allocations once the checkpoint is written; a
//     grow holds its new ones from the bind.

// speed is the job's speed at gpus.
func (r *run) speed(j *jobRun, gpus int) float64 {
	if j.job.Elastic == nil || gpus >= j.spec.Shape.GPUs {
		return 1
	}
	return math.Pow(float64(gpus)/float64(j.spec.Shape.GPUs), r.opt.ElasticScaling)
}

// finishAt is when the job's remaining work ends at its current speed,
// from its run's start.
func (r *run) finishAt(j *jobRun) time.Duration {
	return j.runStart + time.Duration(float64(j.remaining)*j.stretch/j.rate)
}

// account books the progress of the job's current stretch of running.
func (r *run) account(j *jobRun) {
	if d := r.now - j.runStart; d > 0 && j.rate > 0 {
		j.remaining = max(j.remaining-time.Duration(float64(d)*j.rate/j.stretch), 0)
	}
	j.runStart = r.now
}

// grow adds a Grow bind's GPUs to a running elastic job and starts its
// resize.
func (r *run) grow(j *jobRun, ids []string, b sched.Bind) {
	if j.resizing {
		r.abortResize(j)
	}
	j.allocs = append(j.allocs, ids...)
	r.m.grows++
	deadline := Epoch.Add(r.now).Add(sched.StopDeadline(&j.job, r.cfg, r.store.measured()))
	r.beginResize(j, nil, b.ResizeFrom+b.GPUs(), deadline)
}

// shrink starts a Preemption with ResizeTo: the listed allocations go once
// the job has checkpointed.
func (r *run) shrink(j *jobRun, p sched.Preemption) {
	if j.resizing {
		r.abortResize(j)
	}
	for _, id := range p.Allocations {
		if i, ok := r.where[id]; ok {
			r.allocs[i].Stopping, r.allocs[i].StopDeadline = true, p.Deadline
		}
	}
	r.recent = append(r.recent, p.Record(Epoch.Add(r.now)))
	r.m.shrinks++
	r.beginResize(j, p.Allocations, p.ResizeTo, p.Deadline)
}

func (r *run) beginResize(j *jobRun, drop []string, to int, deadline time.Time) {
	r.account(j)
	j.gen++ // the finish event no longer applies
	j.rate, j.resizing, j.dropping = 0, true, drop
	j.stopAt = r.now
	j.stopGen++
	rec := j.job.Resizing() // the core reads only when it last changed
	rec.ResizedAt = Epoch.Add(r.now)
	j.job.Size, j.job.ResizeRecord = to, &rec
	j.resizes++
	r.store.start(j.idx, j.spec.Team, float64(j.spec.CheckpointBytes), r.now)
	r.kickStorage()
	r.schedule(max(deadline.Sub(Epoch), r.now), evKill, j.idx, j.stopGen)
}

// endResize: the checkpoint is written (clean) or the deadline passed; the
// job restarts at its new size.
func (r *run) endResize(j *jobRun, clean bool) {
	j.stopGen++
	j.resizing = false
	held := r.heldGPUs(j)
	r.m.lost += float64(held) * (r.now - j.stopAt).Hours()
	if !clean {
		// Back to the last durable checkpoint: the stretch since it is
		// done again.
		every := j.spec.DurableEvery
		if every <= 0 {
			every = DefaultDurableEvery
		}
		lost := (j.stopAt - j.segStart) % every
		j.remaining += time.Duration(float64(lost) * j.segRate / j.stretch)
		r.m.lost += float64(j.gpus) * lost.Hours()
		r.m.kills++
	} else {
		j.job.EditRun().LastCheckpointAt = Epoch.Add(r.now)
	}
	r.dropResized(j)
	restart := r.restartTime()
	r.m.lost += float64(j.gpus) * restart.Hours()
	j.runStart = r.now + restart
	j.rate, j.segStart, j.segRate = r.speed(j, j.gpus), j.runStart, r.speed(j, j.gpus)
	j.gen++
	r.schedule(r.finishAt(j), evFinish, j.idx, j.gen)
}

// abortResize ends a resize that a newer decision overtakes (a preemption,
// or another resize): what it dropped is gone, its write is cancelled, and
// the job stays stopped (speed 0) for whatever comes next.
func (r *run) abortResize(j *jobRun) {
	if w := r.store.cancel(j.idx, r.now); w != nil {
		r.store.report(w, r.now, false)
	}
	r.kickStorage()
	j.stopGen++
	j.resizing = false
	r.m.lost += float64(r.heldGPUs(j)) * (r.now - j.stopAt).Hours()
	j.stopAt = r.now
	r.dropResized(j)
}

// dropResized releases a shrink's allocations and recounts the job's GPUs.
func (r *run) dropResized(j *jobRun) {
	if len(j.dropping) > 0 {
		gone := map[string]bool{}
		for _, id := range j.dropping {
			gone[id] = true
			r.dropAlloc(id)
		}
		kept := j.allocs[:0]
		for _, id := range j.allocs {
			if !gone[id] {
				kept = append(kept, id)
			}
		}
		j.allocs, j.dropping = kept, nil
		r.markFreed()
	}
	j.gpus = r.heldGPUs(j)
}

func (r *run) heldGPUs(j *jobRun) int {
	n := 0
	for _, id := range j.allocs {
		if i, ok := r.where[id]; ok {
			n += r.allocs[i].GPUs.Count()
		}
	}
	return n
}

// markFreed asks for a pass soon: GPUs came free.
func (r *run) markFreed() {
	if r.shortGPUs > shortEpsilon {
		r.dirty = true // what an inference replica may wait for
	} else {
		r.dirtySlow = true
	}
}

// elasticPick says whether a job is elastic, for a share of its class:
// from a hash of its id, not the workload's random stream, so that the
// same seed draws the same jobs whatever the share.
func elasticPick(id string, share float64) bool {
	if share <= 0 {
		return false
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	// FNV alone leaves ids that differ in their last digit close
	// together; splitmix64's finaliser spreads them.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return float64(h>>11)/float64(1<<53) < share
}

// elasticRange is the range a seed job of gpus and topology t runs in
// when elastic: half its size (in t's step: whole nodes, or single GPUs of
// a node job's one node) to all of it. A job of one step is never elastic.
func elasticRange(gpus int, t model.Topology) *model.Elastic {
	step := model.StepOf(t)
	lo := max(gpus/2/step*step, step)
	if lo >= gpus {
		return nil
	}
	return &model.Elastic{MinGPUs: lo, MaxGPUs: gpus}
}
