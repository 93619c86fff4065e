package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// HeartbeatResult is what a sustained heartbeat run measured.
type HeartbeatResult struct {
	Sent int64
	// Failed counts heartbeats the server answered with an error (or not
	// at all); Dropped, those never sent because every sender was busy:
	// the load generator's limit, not the server's answer.
	Failed   int64
	Dropped  int64
	Duration time.Duration
	// Latency is each heartbeat's round trip.
	Latency Latencies
	// Lag is heartbeat-to-decision: from the heartbeat that reports an
	// allocation exited to the job waiting for its GPUs being bound.
	Lag Latencies
	// LagLate is Lag over the probes of the run's second half: once a
	// fleet that came up beside a queue has bound it, the lag of a fleet
	// at work, not of one binding its backlog.
	LagLate Latencies
	// LagStopped says why the probes stopped before the run ended ("" if
	// they did not): a figure of 0 probes must say why.
	LagStopped string
}

// Rate is heartbeats per second achieved.
func (r HeartbeatResult) Rate() float64 { return float64(r.Sent) / r.Duration.Seconds() }

// Heartbeats keeps n registered nodes heartbeating every interval for
// duration, spread evenly over the interval, with workers senders; and
// meanwhile runs lag probes once a second on a dedicated probe node.
func Heartbeats(ctx context.Context, c *client.Client, n, perPod int, interval, duration time.Duration, workers int) (HeartbeatResult, error) {
	var res HeartbeatResult
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	work := make(chan int, workers*4)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := range work {
				s := time.Now()
				if _, err := c.Heartbeat(context.Background(), nodeReport(i, perPod)); err != nil {
					atomic.AddInt64(&res.Failed, 1)
					continue
				}
				atomic.AddInt64(&res.Sent, 1)
				mine = append(mine, time.Since(s))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	type lagged struct {
		d, late []time.Duration
		why     string
	}
	lagCh := make(chan lagged, 1)
	half := time.Now().Add(duration / 2)
	go func() {
		d, late, why := probeLag(ctx, c, half)
		lagCh <- lagged{d, late, why}
	}()
	t0 := time.Now()
	// Each tick sends what the schedule owes by now: n nodes per
	// interval, evenly, however coarse the ticker is.
	perSec := float64(n) / interval.Seconds()
	tick := time.NewTicker(time.Millisecond)
	i := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			owed := int(time.Since(t0).Seconds()*perSec) - i
			for k := 0; k < owed; k++ {
				select {
				case work <- i % n:
				default:
					atomic.AddInt64(&res.Dropped, 1) // the senders cannot keep up
				}
				i++
			}
		}
	}
	_ = i
	tick.Stop()
	close(work)
	wg.Wait()
	res.Duration = time.Since(t0)
	res.Latency = summarize(lat)
	l := <-lagCh
	res.Lag, res.LagLate, res.LagStopped = summarize(l.d), summarize(l.late), l.why
	return res, nil
}

// probeLag measures heartbeat-to-decision once a second: a 1-GPU probe
// node runs job A while job B waits for that GPU; the node reports A
// exited, and the lag runs until B is bound. It retries a busy leader's
// 503 as an agent would, and says why it stopped if it stopped early.
// probeLimit is how long a probe job may take to be bound before the
// probes stop. It is long: a slow decision is a sample of the lag, not
// a reason to drop it (while 12,500 nodes register and fill with the
// queue, the first one took over 10 s).
const probeLimit = 60 * time.Second

// probePriority ranks the probe jobs ahead of the rest of the load: a
// pass writes at most control.max_binds_per_pass allocations, in rank
// order, so a probe at the back of a queue that is binding would measure
// its wait behind the queue's binds, not the time from a heartbeat to
// the decision it allows.
const probePriority = 1000

func probeLag(ctx context.Context, c *client.Client, half time.Time) (out, late []time.Duration, why string) {
	// A model of its own per run: the other load asks for H100, so nothing
	// else lands there.
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	probe := api.Heartbeat{NodeID: "lg-probe-" + run, BootEpoch: 1, Pod: "lg-probe", Model: "PROBE-" + run, GPUs: 1, CPUMilli: 1000, MemoryMiB: 1024}
	if err := registerOne(ctx, c, probe); err != nil {
		return nil, nil, "registering the probe node: " + err.Error()
	}
	submit := func(name string) (string, error) {
		acc, err := c.SubmitJob(ctx, api.JobRequest{Name: name, GPUs: 1, Topology: "node", GPUModel: probe.Model, Priority: probePriority, Command: []string{"true"}}, "")
		return acc.JobID, err
	}
	stopped := func(what string, err error) string {
		if ctx.Err() != nil {
			return "" // the run ended
		}
		return what + ": " + err.Error()
	}
	running, err := submit("probe-0")
	if err != nil {
		return out, late, stopped("submitting the first probe job", err)
	}
	for k := 1; ctx.Err() == nil; k++ {
		if err := waitRunning(ctx, c, running, 5*time.Millisecond, probeLimit); err != nil {
			return out, late, stopped("probe job "+running+" not running", err)
		}
		next, err := submit(fmt.Sprintf("probe-%d", k))
		if err != nil {
			return out, late, stopped("submitting a probe job", err)
		}
		j, err := c.Job(ctx, running)
		if err != nil || len(j.Allocations) == 0 {
			return out, late, stopped("reading probe job "+running, fmt.Errorf("%v (%d allocations)", err, len(j.Allocations)))
		}
		time.Sleep(200 * time.Millisecond) // let B settle into the queue
		rep := probe
		rep.Allocations = []model.ActualAlloc{{ID: j.Allocations[0].ID, State: model.ActualExited}}
		t0 := time.Now()
		if err := registerOne(ctx, c, rep); err != nil {
			return out, late, stopped("the probe node's heartbeat", err)
		}
		if err := waitRunning(ctx, c, next, 2*time.Millisecond, probeLimit); err != nil {
			return out, late, stopped("probe job "+next+" not bound", err)
		}
		lag := time.Since(t0)
		out = append(out, lag)
		if t0.After(half) {
			late = append(late, lag)
		}
		running = next
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return out, late, ""
}
