package sim

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"
)

// FluidMatchName is the fluid-match row's name in --policy and reports.
const FluidMatchName = "fluid-match"

// MatchPolicy is the policy whose queue times fluid-match tries to meet:
// the one the claims are measured against, plain best-fit.
const MatchPolicy = "best-fit"

// fluid-match asks whether any policy that serves inference in full could
// have every class's queue p90 at or under MatchPolicy's, all at once, on
// this workload. bound answers it for one class at a time and fluid-slo
// for the SLO class against the rest; a policy measured against best-fit
// must meet it in all of them together.
//
// It replays training on the fluid pool (bound.go: no topology, free
// pauses, inference served first) with every job given a deadline: its
// submit time plus a margin of MatchPolicy's unrounded p90 for its class
// (matchClasses). Jobs run least slack first: the deadline's wait less
// the time waited so far, which does not shrink while a job runs. A job
// past its deadline is counted a miss whenever it runs. While its class's
// p90 can still spare the miss it waits behind every job in time, in
// submit order: ranking the late first, as plain earliest-deadline-first
// does, makes the jobs behind them late too. Once the class cannot spare
// it, the class is lost (its p90 will be a late job's wait), and its late
// jobs run either before or after the jobs in time (a variant each). Least slack first alone
// pauses two jobs for each other in turn as their slacks cross; the
// sticky variants keep a running job in time running instead. The order
// is recomputed every matchStep while some jobs run and others wait. The
// row keeps the variant over the fewest targets (then the least over
// them), trying them until one meets them all, and its note says which
// it kept and which classes it left over their target. Only the queue
// rows are replayed: the row says nothing of completion times.
//
// The row is a relaxation of the question, not an answer. A class met
// here may still be out of reach for a policy on real nodes: topology and
// the price of preemption are what the fluid pool takes away. A class
// missed is not proven out of reach either (no variant is optimal for
// gangs of different widths); MatchPolicy, which sheds inference demand
// instead of preempting training, got there with GPUs this replay gives
// to inference.
const matchStep = 60.0 // seconds

// matchClasses are the size classes that partition training: each job is
// in exactly one, and its deadline is that class's target. The classes
// that join them (<64, 64+) are checked against theirs afterwards.
var matchClasses = []string{"<8", "8-63", "64-255", ">=256"}

// matchMargins are the fractions of the targets the deadlines are set at,
// one replay each; the row keeps the one over the fewest targets, then the
// least over them. A deadline at the target itself leaves no room for the
// re-ranking step, nor for the gangs that start only once they outrank
// everything: one set earlier can meet the target where that one did not.
var matchMargins = []float64{1, 0.9, 0.75}

// FluidMatch is the fluid-match row for w, against the queue times of
// target, MatchPolicy's row for the same workload and options.
func FluidMatch(w *Workload, opt Options, target *Metrics) *Metrics {
	goal, jobs, names := matchGoals(w, target)
	wall := time.Now()
	var (
		best     *Metrics
		bestV    matchVariant
		bestOver []string
		bestBy   float64
	)
	for _, v := range matchVariants() {
		m := matchReplay(w, opt, goal, jobs, v)
		var over []string
		by := 0.0 // how far over, summed as fractions of the targets
		for _, c := range SizeClasses {
			t, got := target.QueueHours[c], m.QueueHours[c]
			if (c == ElasticClass || c == RigidClass) && target.QueueHours[ElasticClass].Count == 0 {
				continue // the 64+ classes are shown only beside elastic jobs
			}
			if t.Count > 0 && got.P90 > t.P90 {
				over = append(over, fmt.Sprintf("%s (%.2f h)", c, got.P90))
				by += (got.P90 - t.P90) / max(t.P90, 0.01)
			}
		}
		if best == nil || len(over) < len(bestOver) || len(over) == len(bestOver) && by < bestBy {
			best, bestV, bestOver, bestBy = m, v, over, by
		}
		if len(over) == 0 {
			break
		}
	}
	verdict := "meets every one"
	if len(bestOver) > 0 {
		verdict = "over it in " + strings.Join(bestOver, ", ")
	}
	best.WallSeconds = time.Since(wall).Seconds()
	how := "a lost class's late jobs after the jobs in time"
	if bestV.lostFirst {
		how = "a lost class's late jobs first"
	}
	if bestV.sticky {
		how += ", running jobs in time kept running"
	}
	best.Note = fmt.Sprintf("ranks least slack first to deadlines at %.0f%% of %s's queue p90 (%s), %s: %s",
		100*bestV.margin, target.Policy, strings.Join(names, ", "), how, verdict)
	return best
}

// matchGoals are the targets, in seconds after submit by classIndex
// (+Inf: none), and how many jobs of w each class replays, with the
// targets as the note names them.
func matchGoals(w *Workload, target *Metrics) (goal [8]float64, jobs [8]int, names []string) {
	for i := range goal {
		goal[i] = math.Inf(1)
	}
	for _, c := range matchClasses {
		if xs := target.queue[c]; len(xs) > 0 {
			goal[classIndex(c)] = rawP90(xs) * 3600
			names = append(names, fmt.Sprintf("%s %.2f h", c, target.QueueHours[c].P90))
		}
	}
	w.eachJob(func(j *JobSpec) {
		if !w.replays(j) {
			return
		}
		for _, c := range jobClasses(j) {
			jobs[classIndex(c)]++
		}
	})
	return goal, jobs, names
}

// matchVariant is one fluid-match replay's setting: the deadlines at
// margin × the targets; lostFirst, where the late jobs of a class with no
// miss to spare rank.
type matchVariant struct {
	margin    float64
	lostFirst bool
	sticky    bool // a running job in time is not paused for one waiting in time
}

// matchVariants are the replays fluid-match tries, in turn, until one
// meets every target: each margin with the late jobs of a lost class
// ranked first, then with them after the jobs still in time; all of it
// least slack first, then with running jobs in time kept running.
func matchVariants() []matchVariant {
	var vs []matchVariant
	for _, sticky := range []bool{false, true} {
		for _, lostFirst := range []bool{true, false} {
			for _, f := range matchMargins {
				vs = append(vs, matchVariant{f, lostFirst, sticky})
			}
		}
	}
	return vs
}

// matchReplay is one fluid-match replay.
func matchReplay(w *Workload, opt Options, goal [8]float64, jobs [8]int, v matchVariant) *Metrics {
	var deadline [8]float64
	var spare [8]int // misses a class's p90 still allows
	for i := range goal {
		deadline[i] = goal[i] * v.margin
		spare[i] = jobs[i] - int(math.Ceil(0.9*float64(jobs[i])))
	}
	class := func(a *boundRun) int { return bits.TrailingZeros8(a.classes & partition) }
	slack := func(a *boundRun) float64 { return deadline[class(a)] - a.waited }
	// Late with no miss to spare in its class (its p90 is now this
	// job's wait: the sooner it runs the better): tier 0 with lostFirst,
	// else 2. In time: 1. Late with misses to spare: 3. Run first, a
	// lost class's late jobs pause jobs still in time, which may make
	// them late too; run after them, they may wait for ever behind a
	// stream of jobs in time. Neither is right on every load.
	tier := func(a *boundRun) int {
		switch {
		case !a.late:
			return 1
		case spare[class(a)] < 0 && v.lostFirst:
			return 0
		case spare[class(a)] < 0:
			return 2
		}
		return 3
	}
	less := func(a, b *boundRun) bool {
		if ta, tb := tier(a), tier(b); ta != tb {
			return ta < tb
		} else if ta == 3 {
			return a.seq < b.seq
		} else if ra, rb := a.rate > 0, b.rate > 0; ta == 1 && v.sticky && ra != rb {
			return ra
		}
		return cmpOr(slack(a), slack(b), a.seq, b.seq)
	}
	// A job is counted late at its deadline, not its target: at a margin
	// under 1 the replay treats a class as lost, and (lostFirst) runs its
	// late jobs first, sooner than the target alone would. That is the
	// margin's point: on seed-heavy 1, counting misses at the target
	// left the two pretrain gangs' p90 0.01 h over best-fit's, counting
	// them at 90% of it met it. The verdict is on the targets alone.
	mark := func(r *boundReplay) {
		for _, a := range r.active {
			if !a.late && slack(a) < 0 {
				a.late = true
				spare[class(a)]--
			}
		}
	}
	// The order changes only as jobs wait; with none waiting, or none
	// running (then every waiting job already had all the free GPUs to
	// fit in, whatever the order), only an event can change what runs.
	wake := func(r *boundReplay) float64 {
		running, waiting := false, false
		for _, a := range r.active {
			running, waiting = running || a.rate > 0, waiting || a.rate == 0
		}
		if !running || !waiting {
			return math.Inf(1)
		}
		return r.t + matchStep
	}
	return relax(w, opt, FluidMatchName, ranking{less: less, wake: wake, mark: mark})
}

// partition is the bits of matchClasses in boundJob.classes.
var partition = func() uint8 {
	var b uint8
	for _, c := range matchClasses {
		b |= 1 << classIndex(c)
	}
	return b
}()

// rawP90 is the nearest-rank p90 of xs, unrounded: a deadline set at the
// rounded figure could be missed by the rounding alone.
func rawP90(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return nearestRank(s, 0.9)
}
