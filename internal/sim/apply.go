package sim

import (
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// apply does with a decision what the control loop does: bind, stop,
// signal preemptions with their deadlines, start relocations, keep the
// reservations for the next pass, and count alerts.
func (r *run) apply(d sched.Decision) {
	for _, b := range d.Binds {
		r.bind(b)
	}
	for _, s := range d.Stops {
		for _, id := range s.Allocations {
			r.dropAlloc(id)
		}
		if sv := r.svc(s.OwnerID); sv != nil {
			done := r.svcTerms(sv)
			delete(sv.replicas, s.Replica)
			done()
		}
	}
	for _, p := range d.Preemptions {
		r.preempt(p)
	}
	for _, rel := range d.Relocations {
		r.relocate(rel)
	}
	r.reservations = d.Reservations
	for _, a := range d.Alerts {
		r.m.alert(a)
	}
}

func (r *run) svc(id string) *svcRun {
	if i, ok := r.svcByID[id]; ok {
		return r.svcs[i]
	}
	return nil
}

func (r *run) bind(b sched.Bind) {
	var ids []string
	for _, pt := range b.Parts {
		ids = append(ids, r.addAlloc(model.Allocation{NodeID: pt.Node, GPUs: pt.GPUs, GPUMilli: pt.GPUMilli, MIGInstance: pt.MIGInstance, CPUMilli: pt.CPUMilli, MemoryMiB: pt.MemoryMiB,
			OwnerKind: b.Kind, OwnerID: b.OwnerID, Replica: b.Replica, Preemptible: b.Preemptible, Borrowed: b.Borrowed, Reservation: b.Reservation}))
	}
	if b.Kind == model.OwnerInference {
		if s := r.svc(b.OwnerID); s != nil {
			done := r.svcTerms(s)
			s.replicas[b.Replica] = append(s.replicas[b.Replica], ids...)
			done()
		}
		return
	}
	j := r.job(b.OwnerID)
	if j == nil {
		return
	}
	now := Epoch.Add(r.now)
	if j.job.State == model.JobPending {
		r.pending--
	}
	j.job.State, j.job.StartedAt, j.job.LastCheckpointAt = model.JobRunning, now, now
	r.sync(j)
	j.allocs, j.runStart, j.stretch = ids, r.now, 1
	if j.spec.Shape.Topology == model.TopologyNode && len(b.Parts) > 1 {
		// Tensor parallelism across nodes: every step pays the §2 penalty.
		j.stretch = 1 + r.opt.Penalty
		j.penalty = float64(j.spec.Shape.GPUs) * (1 - 1/j.stretch)
		r.penalty += j.penalty
		r.m.stretched++
	}
	if !j.started {
		j.started = true
		r.m.queued(j, r.now-j.spec.Submit)
	}
	j.gen++
	r.schedule(r.now+time.Duration(float64(j.remaining)*j.stretch), evFinish, j.idx, j.gen)
}

func (r *run) complete(j *jobRun) {
	j.done = true
	r.release(j)
	j.job.State = model.JobCompleted
	r.m.completed(j, r.now-j.spec.Submit)
	r.drop(j)
	r.dirtySlow = true
}

// release gives back a job's GPUs.
func (r *run) release(j *jobRun) {
	for _, id := range j.allocs {
		r.dropAlloc(id)
	}
	j.allocs = nil
	r.penalty -= j.penalty
	j.penalty = 0
}

// preempt marks the job's allocations stopping; it checkpoints (R3: a fresh
// checkpoint at stop, so only the restart is lost) and exits after writing
// it, or at the deadline, whichever is first.
func (r *run) preempt(p sched.Preemption) {
	j := r.job(p.JobID)
	if j == nil || j.done {
		return
	}
	for _, id := range p.Allocations {
		if i, ok := r.where[id]; ok {
			r.allocs[i].Stopping, r.allocs[i].StopDeadline = true, p.Deadline
		}
	}
	j.gen++ // the finish event no longer applies
	ran := r.now - j.runStart
	j.remaining -= time.Duration(float64(ran) / j.stretch)
	if j.remaining < 0 {
		j.remaining = 0
	}
	write := time.Second
	if j.job.Checkpoint != nil {
		write = max(write, time.Duration(float64(j.job.Checkpoint.SizeBytes)/r.opt.StorageBandwidth*float64(time.Second)))
	}
	exitAt := min(r.now+write, p.Deadline.Sub(Epoch))
	r.schedule(exitAt, evExit, j.idx, 0)
	r.recent = append(r.recent, sched.PreemptionRecord{At: Epoch.Add(r.now), JobID: p.JobID, GPUs: p.GPUs})
	r.m.preempted(j, p, r.opt.RestartOverhead, r.job(p.For) == nil)
	j.preempts++
}

// exit: the preempted job is gone; it goes back to the queue with its
// progress (less the restart it will pay) and preempt_count + 1.
func (r *run) exit(j *jobRun) {
	r.release(j)
	j.remaining += r.opt.RestartOverhead
	j.job.State, j.job.QueuedAt = model.JobPending, Epoch.Add(r.now)
	j.job.StartedAt = time.Time{}
	j.job.PreemptCount++
	r.pending++
	r.sync(j)
	if r.shortGPUs > shortEpsilon {
		r.dirty = true // its GPUs may be what an inference replica waits for
	} else {
		r.dirtySlow = true
	}
}

// relocate starts the replica's new copy; the old one drains once the new
// one is ready (make before break), after the readiness window.
func (r *run) relocate(rel sched.Relocation) {
	for _, pt := range rel.To.Parts {
		id := r.addAlloc(model.Allocation{NodeID: pt.Node, GPUs: pt.GPUs, OwnerKind: model.OwnerInference, OwnerID: rel.Deployment, Replica: rel.Replica})
		if s := r.svc(rel.Deployment); s != nil {
			s.replicas[rel.Replica] = append(s.replicas[rel.Replica], id)
		}
	}
	r.relocSeq++
	r.relocs[r.relocSeq] = rel
	r.m.relocations++
	r.schedule(r.now+r.opt.ReadyWithin, evRelocate, r.relocSeq, 0)
}

func (r *run) finishRelocation(i int) {
	rel, ok := r.relocs[i]
	if !ok {
		return
	}
	delete(r.relocs, i)
	old := map[string]bool{}
	for _, id := range rel.From {
		old[id] = true
		r.dropAlloc(id)
	}
	if s := r.svc(rel.Deployment); s != nil {
		var keep []string
		for _, id := range s.replicas[rel.Replica] {
			if !old[id] {
				keep = append(keep, id)
			}
		}
		s.replicas[rel.Replica] = keep
	}
	r.dirty = true
}
