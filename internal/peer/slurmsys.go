package peer

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/sim"
)

// Step is the stand-in's step, simulated: a job of Work runs Work/Step
// steps, and checkpoints every durable interval in steps.
const Step = time.Minute

func (s *Slurm) Name() string { return "slurm" }

// trainSteps sizes the stand-in training process both systems' jobs run:
// its steps, the real time of one, and the steps between checkpoints.
func trainSteps(j *sim.JobSpec, opt Options) (steps int, stepTime time.Duration, every int) {
	steps = max(1, int(math.Ceil(float64(j.Work)/float64(Step))))
	durable := j.DurableEvery
	if durable <= 0 {
		durable = sim.DefaultDurableEvery
	}
	return steps, opt.Real(Step), max(1, int(durable/Step))
}

// Submit is one sbatch: node jobs on one node (-N1), whole-node pod
// gangs as -N nodes under one switch (--switches=1, waiting as long as it
// takes), other pod jobs as --gpus under one switch, any as --gpus
// anywhere. The workload's priority is the job's (--priority, as an
// operator may); a declared runtime is its --time, so backfill can plan
// around it.
func (s *Slurm) Submit(ctx context.Context, j *sim.JobSpec) error {
	per := s.cfg.Nodes[0].GPUs
	part := "train"
	if !j.Preemptible {
		part = "train-np"
	}
	args := []string{"--parsable", "--job-name=" + j.ID, "--partition=" + part, "--requeue",
		"--output=" + filepath.Join(s.cfg.Dir, "out", "%j.out"), "--chdir=" + s.cfg.Dir,
		fmt.Sprintf("--priority=%d", max(1, j.Priority))}
	g := j.Shape.GPUs
	switch j.Shape.Topology {
	case model.TopologyNode:
		if s.cfg.GPUsOnly {
			args = append(args, fmt.Sprintf("--gpus=%d", g))
		} else {
			args = append(args, "--nodes=1", "--ntasks=1", fmt.Sprintf("--gres=gpu:%d", g))
		}
	case model.TopologyPod:
		if g%per == 0 {
			args = append(args, fmt.Sprintf("--nodes=%d", g/per), "--ntasks-per-node=1", fmt.Sprintf("--gres=gpu:%d", per))
		} else {
			args = append(args, fmt.Sprintf("--gpus=%d", g))
		}
		args = append(args, "--switches=1@365-0")
	default:
		args = append(args, fmt.Sprintf("--gpus=%d", g))
	}
	if j.MaxRuntime > 0 {
		args = append(args, fmt.Sprintf("--time=%d", max(1, int(math.Ceil(s.opt.Real(j.MaxRuntime).Minutes())))))
	}
	steps, stepTime, every := trainSteps(j, s.opt)
	ck := filepath.Join(s.cfg.Dir, "ck", j.ID)
	// The newest checkpoint by step number, handed over the way berth's
	// agent hands it ($BERTH_RESTORE).
	wrap := fmt.Sprintf(`export BERTH_JOB_ID=%s BERTH_CHECKPOINT_DIR=%s; r=$(ls %s 2>/dev/null | sed -n 's/.*-step-\([0-9]*\)\.json$/\1 &/p' | sort -n | tail -n1 | cut -d' ' -f2); [ -n "$r" ] && export BERTH_RESTORE=%s/$r; exec %s workload train --steps %d --step-time %s --checkpoint-every %d`,
		j.ID, ck, ck, ck, s.cfg.Berth, steps, stepTime, every)
	args = append(args, "--wrap", wrap)
	_, err := s.cmd(ctx, "sbatch", args...)
	return err
}

// Scale submits or cancels replica jobs in the infer partition: one
// whole-shape job per replica, cancelling the newest first (pending
// before running).
func (s *Slurm) Scale(ctx context.Context, svc *sim.ServiceSpec, replicas int) error {
	s.mu.Lock()
	have := len(s.replicas[svc.ID])
	s.mu.Unlock()
	for ; have < replicas; have++ {
		s.mu.Lock()
		s.seq[svc.ID]++
		name := fmt.Sprintf("%s.r%d", svc.ID, s.seq[svc.ID])
		s.mu.Unlock()
		out, err := s.cmd(ctx, "sbatch", "--parsable", "--job-name="+name, "--partition=infer", "--nodes=1", "--ntasks=1",
			fmt.Sprintf("--gres=gpu:%d", svc.Shape.GPUs), "--output=/dev/null", "--chdir="+s.cfg.Dir, "--wrap", fmt.Sprintf("exec sleep %d", s.replicaLife()))
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.replicas[svc.ID] = append(s.replicas[svc.ID], strings.TrimSpace(strings.Split(out, ";")[0]))
		s.mu.Unlock()
	}
	if have <= replicas {
		return nil
	}
	s.mu.Lock()
	ids := s.replicas[svc.ID]
	cut := ids[replicas:]
	s.replicas[svc.ID] = ids[:replicas:replicas]
	s.mu.Unlock()
	_, err := s.cmd(ctx, "scancel", cut...)
	return err
}

// replicaLife is how long a replica's process sleeps, in real seconds:
// past the replay's end, so that one a killed harness could not cancel
// (slurmstepd outlives slurmd by design) still ends on its own.
func (s *Slurm) replicaLife() int {
	if s.opt.Horizon <= 0 {
		return 3600
	}
	return int(s.opt.Real(s.opt.Horizon).Seconds()) + 120
}

var gresIdx = regexp.MustCompile(`Nodes=(\S+) .*GRES=gpu:\d+\(IDX:([0-9,\-]+)\)`)

// placement is a running job's GPU indices (scontrol show job -d), read
// once per run while it is RUNNING. While it is configuring or
// completing (a requeued run's tail, its restart count already bumped)
// scontrol has no indices: the job's last known placement stands.
func (s *Slurm) placement(ctx context.Context, id string, run int, state string) string {
	key := fmt.Sprintf("%s/%d", id, run)
	s.mu.Lock()
	p, ok := s.placed[key]
	last := s.placed[id]
	s.mu.Unlock()
	if ok {
		return p
	}
	if state != "RUNNING" {
		return last
	}
	out, err := s.cmd(ctx, "scontrol", "show", "job", "-d", id)
	if err != nil {
		return last
	}
	var parts []string
	for _, m := range gresIdx.FindAllStringSubmatch(out, -1) {
		for _, n := range expandHosts(m[1]) {
			parts = append(parts, n+":"+m[2])
		}
	}
	if len(parts) == 0 {
		return last
	}
	p = strings.Join(parts, " ")
	s.mu.Lock()
	s.placed[key], s.placed[id] = p, p
	s.mu.Unlock()
	return p
}

// Poll reads squeue (every job, by name) and sinfo (GPUs used per node).
func (s *Slurm) Poll(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{Jobs: map[string]JobView{}, Replicas: map[string]int{}}
	out, err := s.cmd(ctx, "squeue", "-h", "-a", "-t", "all", "-O", "JobID:30|,Name:200|,State:30|,NodeList:4000|,RestartCnt:10|,Partition:30|")
	if err != nil {
		return snap, err
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "|")
		if len(f) < 6 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		name, state, nodes, part := f[1], f[2], f[3], f[5]
		restarts, _ := strconv.Atoi(f[4])
		st := slurmState(state)
		if part == "infer" {
			// A replica serves once RUNNING (not while it is configured,
			// nor while a cancelled one completes).
			if i := strings.LastIndex(name, ".r"); state == "RUNNING" && i > 0 {
				snap.Replicas[name[:i]]++
			}
			continue
		}
		v := JobView{State: st, Restarts: restarts}
		if st == Running {
			v.Nodes = expandHosts(nodes)
			v.Placement = s.placement(ctx, f[0], restarts, state)
		}
		// A name reused (it never is by the harness) keeps its live run.
		if old, ok := snap.Jobs[name]; ok && old.State == Running {
			continue
		}
		snap.Jobs[name] = v
	}
	used, closed, err := s.gpusUsed(ctx)
	if err != nil {
		return snap, err
	}
	snap.Largest, snap.FreeNodes, snap.AllocatedGPUs = shapeOf(s.cfg.Nodes, used, closed)
	return snap, nil
}

// gpusUsed is GPUs in use per node, from sinfo, and the nodes nothing
// can be placed on now (down, drained, failing).
func (s *Slurm) gpusUsed(ctx context.Context) (map[string]int, map[string]bool, error) {
	out, err := s.cmd(ctx, "sinfo", "-h", "-N", "-p", "train", "-O", "NodeList:40|,GresUsed:200|,StateCompact:30|")
	if err != nil {
		return nil, nil, err
	}
	used, closed := map[string]int{}, map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "|")
		if len(f) < 3 {
			continue
		}
		name, gres, state := strings.TrimSpace(f[0]), strings.TrimSpace(f[1]), strings.TrimSpace(f[2])
		n, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(gres, "(", 2)[0], "gpu:"))
		switch strings.TrimRight(state, "*~#!%$@^-") {
		case "idle", "mix", "alloc", "comp", "plnd", "resv":
			// plnd: idle, held by backfill for a waiting job; resv: in a
			// reservation. Both still place their own.
		default:
			closed[name] = true
		}
		used[name] = n
	}
	return used, closed, nil
}

// shapeOf is largest_placeable, fully free nodes and GPUs in use, by the
// core's own index over allocations standing for what is used, with no
// pools: both systems' figures come from here, from what each reports
// in use per node, so neither is measured by the other's rules. A closed
// node counts as full for placement, but only its used GPUs count as
// allocated.
func shapeOf(nodes []model.Node, used map[string]int, closed map[string]bool) (sched.Largest, int, int) {
	var allocs []model.Allocation
	free, alloc := 0, 0
	for _, n := range nodes {
		u := min(used[n.ID], n.GPUs)
		alloc += u
		if closed[n.ID] {
			u = n.GPUs
		}
		if u == 0 {
			free++
			continue
		}
		allocs = append(allocs, model.Allocation{ID: "used-" + n.ID, NodeID: n.ID, GPUs: model.GPUMask(1<<u - 1), OwnerKind: model.OwnerTraining, OwnerID: "used-" + n.ID})
	}
	return sched.NewIndex(nodes, allocs, sched.Config{}).Largest(), free, alloc
}

func slurmState(s string) JobState {
	switch s {
	case "RUNNING", "CONFIGURING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING":
		return Running
	case "COMPLETED":
		return Done
	case "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED":
		return Failed
	}
	return Pending // PENDING, PREEMPTED, REQUEUED, REQUEUE_HOLD, REQUEUE_FED, SUSPENDED, ...
}

// expandHosts expands a Slurm hostlist ("n[000-003,007],m1").
func expandHosts(list string) []string {
	var out []string
	depth, start := 0, 0
	var parts []string
	for i, c := range list {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, list[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, list[start:])
	for _, p := range parts {
		if p == "" {
			continue
		}
		open := strings.IndexByte(p, '[')
		if open < 0 || !strings.HasSuffix(p, "]") {
			out = append(out, p)
			continue
		}
		prefix := p[:open]
		for _, r := range strings.Split(p[open+1:len(p)-1], ",") {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				out = append(out, prefix+lo)
				continue
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || b < a || b-a > 1<<16 {
				out = append(out, prefix+r)
				continue
			}
			for k := a; k <= b; k++ {
				out = append(out, fmt.Sprintf("%s%0*d", prefix, len(lo), k))
			}
		}
	}
	return out
}
