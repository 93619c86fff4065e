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
			r.dropReplica(sv, s.Replica)
		}
	}
	if len(d.Stops) > 0 {
		// The stopped replicas' GPUs are free now: the control loop's
		// watch sees them go, and what waits for them gets a pass on the
		// next tick, not the periodic one.
		if r.shortGPUs > shortEpsilon {
			r.dirty = true
		} else {
			r.dirtySlow = true
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

// split reports whether parts cross the boundary shape's topology asks to
// stay inside: nodes for `node`, pods for `pod`. Such a tensor-parallel
// placement pays the topology penalty on every step (§2, §6).
func (r *run) split(shape model.Shape, parts []sched.Part) bool {
	switch shape.Topology {
	case model.TopologyNode:
		// Several parts on one node (an elastic node job's minimum and
		// its growth) share its NVLink domain: only another node splits.
		for _, pt := range parts[1:] {
			if pt.Node != parts[0].Node {
				return true
			}
		}
	case model.TopologyPod:
		for _, pt := range parts[1:] {
			if r.podOf[pt.Node] != r.podOf[parts[0].Node] {
				return true
			}
		}
	}
	return false
}

func (r *run) bind(b sched.Bind) {
	var ids []string
	for _, pt := range b.Parts {
		ids = append(ids, r.addAlloc(model.Allocation{NodeID: pt.Node, GPUs: pt.GPUs, GPUMilli: pt.GPUMilli, MIGInstance: pt.MIGInstance, CPUMilli: pt.CPUMilli, MemoryMiB: pt.MemoryMiB,
			OwnerKind: b.Kind, OwnerID: b.OwnerID, Replica: b.Replica, Preemptible: b.Preemptible, Borrowed: b.Borrowed, Reservation: b.Reservation}))
	}
	if b.Kind == model.OwnerInference {
		if s := r.svc(b.OwnerID); s != nil {
			r.startReplica(s, b, ids)
		}
		return
	}
	j := r.job(b.OwnerID)
	if j == nil {
		return
	}
	if b.Grow {
		r.grow(j, ids, b)
		return
	}
	now := Epoch.Add(r.now)
	if j.job.State == model.JobPending {
		r.pending--
		j.waited += r.now - j.queuedSince
	}
	j.job.State, j.job.StartedAt = model.JobRunning, now
	j.job.EditRun().LastCheckpointAt = now
	j.allocs, j.runStart, j.stretch, j.gpus = ids, r.now, 1, 0
	for _, pt := range b.Parts {
		j.gpus += pt.GPUs.Count()
	}
	if r.split(j.spec.Shape, b.Parts) {
		// Tensor parallelism across its boundary: every step pays.
		j.stretch = 1 + r.opt.Penalty
		j.penalty = float64(j.spec.Shape.GPUs) * (1 - 1/j.stretch)
		r.penalty += j.penalty
		r.m.stretched++
	}
	if !j.started {
		j.started = true
		r.m.firstQueued(j, r.now-j.spec.Submit)
	}
	if j.job.Elastic != nil {
		j.job.Size = j.gpus
	}
	j.rate = r.speed(j, j.gpus)
	j.segStart, j.segRate = r.now, j.rate
	j.gen++
	r.schedule(r.finishAt(j), evFinish, j.idx, j.gen)
}

// startReplica records a bound replica; it serves once its model loads.
func (r *run) startReplica(s *svcRun, b sched.Bind, ids []string) {
	rep := s.replicas[b.Replica]
	if rep == nil {
		rep = &replica{weight: 1}
		done := r.svcTerms(s)
		s.replicas[b.Replica] = rep
		done()
	}
	rep.allocs = append(rep.allocs, ids...)
	if r.split(s.spec.Shape, b.Parts) {
		rep.weight = 1 / (1 + r.opt.Penalty)
		rep.penalty = shapeGPUs(s.spec.Shape) * (1 - rep.weight)
		r.penalty += rep.penalty
		r.m.stretched++
	}
	rep.gen++
	r.schedule3(r.now+r.loadTime(s), evReady, r.svcByID[s.spec.ID], b.Replica, rep.gen)
}

// loadTime draws a replica's model load (zero when the workload sets none).
func (r *run) loadTime(s *svcRun) time.Duration {
	lo, hi := s.spec.Load[0], s.spec.Load[1]
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

func (r *run) replicaReady(svc, num, gen int) {
	s := r.svcs[svc]
	rep := s.replicas[num]
	if rep == nil || rep.gen != gen || rep.ready {
		return
	}
	done := r.svcTerms(s)
	rep.ready = true
	s.ready += rep.weight
	done()
}

// dropReplica forgets a stopped replica.
func (r *run) dropReplica(s *svcRun, num int) {
	rep := s.replicas[num]
	if rep == nil {
		return
	}
	done := r.svcTerms(s)
	if rep.ready {
		s.ready -= rep.weight
	}
	r.penalty -= rep.penalty
	delete(s.replicas, num)
	done()
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

// preempt marks the job's allocations stopping and starts its checkpoint
// (R3: a fresh checkpoint at stop) on the shared storage. The job exits
// when the write completes, or is killed at the deadline, whichever is
// first.
func (r *run) preempt(p sched.Preemption) {
	j := r.job(p.JobID)
	if j == nil || j.done || j.stopping {
		return
	}
	if p.ResizeTo > 0 {
		r.shrink(j, p)
		return
	}
	if j.resizing {
		r.abortResize(j)
	}
	for _, id := range p.Allocations {
		if i, ok := r.where[id]; ok {
			r.allocs[i].Stopping, r.allocs[i].StopDeadline = true, p.Deadline
		}
	}
	j.gen++ // the finish event no longer applies
	j.ran = r.now - j.runStart
	j.stopAt = r.now
	j.stopGen++
	j.stopping = true
	r.store.start(j.idx, j.spec.Team, float64(j.spec.CheckpointBytes), r.now)
	r.kickStorage()
	r.schedule(max(p.Deadline.Sub(Epoch), r.now), evKill, j.idx, j.stopGen)
	r.recent = append(r.recent, p.Record(Epoch.Add(r.now)))
	r.m.preempted(j, p, r.job(p.For) == nil)
	j.preempts++
}

// kickStorage schedules the storage's next look after its writes changed.
func (r *run) kickStorage() {
	r.store.gen++
	if at := r.store.next(); at >= 0 {
		r.schedule(at, evStorage, 0, r.store.gen)
	}
}

// storageEvent completes the checkpoints written by now: those jobs exit
// cleanly, their progress saved.
func (r *run) storageEvent() {
	r.store.advance(r.now)
	for _, w := range r.store.finished() {
		r.store.report(w, r.now, true)
		if j := r.jobs[w.job]; j != nil && j.stopping {
			r.exit(j, true)
		} else if j != nil && j.resizing {
			r.endResize(j, true)
		}
	}
	r.kickStorage()
}

// kill: the deadline passed with the checkpoint unwritten. The job is
// SIGKILLed and keeps only its last durable checkpoint.
func (r *run) kill(j *jobRun) {
	if w := r.store.cancel(j.idx, r.now); w != nil {
		r.store.report(w, r.now, false)
	}
	r.kickStorage()
	r.m.kills++
	r.exit(j, false)
}

// exit: the preempted job is gone; it goes back to the queue with the
// progress its checkpoint saved (all of it when the preemption checkpoint
// completed, else up to its last durable one), pays a restart, and has
// preempt_count + 1.
func (r *run) exit(j *jobRun, clean bool) {
	j.stopGen++ // a pending kill no longer applies
	j.stopping = false
	kept := j.ran
	if !clean {
		every := j.spec.DurableEvery
		if every <= 0 {
			every = DefaultDurableEvery
		}
		kept = j.ran / every * every
	}
	j.remaining = max(j.remaining-time.Duration(float64(kept)*j.rate/j.stretch), 0)
	restart := r.restartTime()
	j.remaining += restart
	gpus := float64(j.gpus)
	r.m.lost += gpus * ((j.ran - kept) + (r.now - j.stopAt) + restart).Hours()
	r.release(j)
	j.job.State, j.job.QueuedAt = model.JobPending, Epoch.Add(r.now)
	j.job.StartedAt, j.job.Size = time.Time{}, 0
	j.job.PreemptCount++
	j.queuedSince = r.now
	r.pending++
	if r.shortGPUs > shortEpsilon {
		r.dirty = true // its GPUs may be what an inference replica waits for
	} else {
		r.dirtySlow = true
	}
}

func (r *run) restartTime() time.Duration {
	lo, hi := r.opt.Restart[0], r.opt.Restart[1]
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

// relocate starts the replica's new copy; the old one drains once the new
// one has loaded its model and is ready (make before break).
func (r *run) relocate(rel sched.Relocation) {
	s := r.svc(rel.Deployment)
	for _, pt := range rel.To.Parts {
		id := r.addAlloc(model.Allocation{NodeID: pt.Node, GPUs: pt.GPUs, OwnerKind: model.OwnerInference, OwnerID: rel.Deployment, Replica: rel.Replica})
		if s != nil {
			if rep := s.replicas[rel.Replica]; rep != nil {
				rep.allocs = append(rep.allocs, id)
			}
		}
	}
	r.relocSeq++
	r.relocs[r.relocSeq] = rel
	r.m.relocations++
	load := time.Duration(0)
	if s != nil {
		load = r.loadTime(s)
	}
	r.schedule(r.now+load, evRelocate, r.relocSeq, 0)
}

func (r *run) finishRelocation(i int) {
	rel, ok := r.relocs[i]
	if !ok {
		return
	}
	delete(r.relocs, i)
	// What the move recovered: largest_placeable.node, as a new job sees
	// it, just before and just after the old copy drains.
	cfg := r.lending()
	before := sched.Available(r.ix, r.reservations, cfg, false).LargestPlaceable.Node
	old := map[string]bool{}
	for _, id := range rel.From {
		old[id] = true
		r.dropAlloc(id)
	}
	r.m.relocGain += sched.Available(r.ix, r.reservations, cfg, false).LargestPlaceable.Node - before
	if s := r.svc(rel.Deployment); s != nil {
		if rep := s.replicas[rel.Replica]; rep != nil {
			var keep []string
			for _, id := range rep.allocs {
				if !old[id] {
					keep = append(keep, id)
				}
			}
			rep.allocs = keep
		}
	}
	r.dirty = true
}
