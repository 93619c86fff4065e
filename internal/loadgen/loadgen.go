package loadgen

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// Latencies summarizes a sample.
type Latencies struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

func summarize(d []time.Duration) Latencies {
	if len(d) == 0 {
		return Latencies{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return Latencies{N: len(d), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: d[len(d)-1]}
}

func (l Latencies) String() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", l.N, ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

// Register makes n nodes known (first-contact heartbeats), in pods of
// perPod nodes, 8 GPUs each.
func Register(ctx context.Context, c *client.Client, n, perPod, workers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := registerOne(ctx, c, nodeReport(i, perPod)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// registerOne sends a node's first heartbeat, retrying a busy leader's
// 503 the way an agent does at its next interval, a few times.
func registerOne(ctx context.Context, c *client.Client, hb api.Heartbeat) error {
	for attempt := 0; ; attempt++ {
		_, err := c.Heartbeat(ctx, hb)
		var se *client.StatusError
		if err == nil || attempt == 4 || !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func nodeReport(i, perPod int) api.Heartbeat {
	return api.Heartbeat{NodeID: fmt.Sprintf("lg-n%05d", i), BootEpoch: 1, Pod: fmt.Sprintf("lg-p%03d", i/perPod),
		Model: "H100", GPUs: 8, CPUMilli: 128000, MemoryMiB: 1 << 20}
}

// Submit runs clients concurrent submitters until total jobs are in and
// returns the latency of each POST /v1/jobs. rate > 0 paces the clients
// to that many submits a second in all (open loop: each client waits its
// turn, as users at keyboards do); 0 runs them flat out (closed loop,
// which measures saturation instead).
func Submit(ctx context.Context, c *client.Client, clients, total int, rate float64) (Latencies, time.Duration, error) {
	r, err := SubmitRun(ctx, c, clients, total, rate, 0)
	return r.Latency, r.Took, err
}

// SubmitResult is one Submit run: latencies, wall time, and the rate of
// the first and the last window of submits (a table that slows as it
// grows shows as a last window slower than the first).
type SubmitResult struct {
	Latency             Latencies
	Took                time.Duration
	Window              int
	FirstRate, LastRate float64 // submits a second over the first and last Window
	// LastLatency is Latency over the last Window submits to return: a
	// run that begins in a burst (a fleet binding its queue) and ends in
	// steady work shows both.
	LastLatency Latencies
}

// SubmitRun is Submit, also timing the first and last window submits
// (window 0: a tenth of total).
func SubmitRun(ctx context.Context, c *client.Client, clients, total int, rate float64, window int) (SubmitResult, error) {
	var next atomic.Int64
	var mu sync.Mutex
	type returned struct {
		at  time.Time
		lat time.Duration
	}
	var done []returned // each submit, in the order they returned
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var every time.Duration
			if rate > 0 {
				every = time.Duration(float64(clients) / rate * float64(time.Second))
				time.Sleep(every * time.Duration(w) / time.Duration(clients)) // stagger
			}
			start := time.Now()
			for k := 0; ; k++ {
				if every > 0 {
					time.Sleep(time.Until(start.Add(every * time.Duration(k))))
				}
				i := int(next.Add(1))
				if i > total || ctx.Err() != nil {
					break
				}
				s := time.Now()
				_, err := c.SubmitJob(ctx, api.JobRequest{Name: fmt.Sprintf("lg-%d", i), Team: "load", GPUs: 1, Topology: "any", GPUModel: "H100",
					Command: []string{"true"}}, "")
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					break
				}
				lat := time.Since(s)
				mu.Lock()
				done = append(done, returned{s.Add(lat), lat})
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	lats := func(rs []returned) []time.Duration {
		out := make([]time.Duration, len(rs))
		for i, r := range rs {
			out[i] = r.lat
		}
		return out
	}
	res := SubmitResult{Latency: summarize(lats(done)), Took: time.Since(t0), Window: window}
	if res.Window <= 0 {
		res.Window = max(1, total/10)
	}
	if n := len(done); n >= 2*res.Window {
		w := res.Window
		res.FirstRate = float64(w) / done[w-1].at.Sub(t0).Seconds()
		res.LastRate = float64(w) / done[n-1].at.Sub(done[n-1-w].at).Seconds()
		res.LastLatency = summarize(lats(done[n-w:]))
	}
	return res, firstErr
}

// List measures GET /v1/jobs from clients concurrent readers for
// duration, each asking for query (for example "limit=500" or
// "state=pending&limit=500"), one page each time. A request's latency
// runs until the last byte of its answer arrived, as curl and hey time
// one: the reader's own decoding of the page (3-5 ms for 500 jobs, in
// the same process as the other readers) is the client's cost, not the
// API's, and comes after.
func List(ctx context.Context, c *client.Client, clients int, duration time.Duration, query string) (Latencies, int, error) {
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	jobs := 0
	var wg sync.WaitGroup
	end := time.Now().Add(duration)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var body bytes.Buffer
			for time.Now().Before(end) && ctx.Err() == nil {
				var page api.JobList
				body.Reset()
				s := time.Now()
				err := c.Stream(ctx, "/v1/jobs?"+query, &body)
				took := time.Since(s)
				if ctx.Err() != nil {
					break // cut short: not a sample (Stream then says nil)
				}
				if err == nil {
					err = json.Unmarshal(body.Bytes(), &page)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, took)
				mu.Lock()
				jobs = max(jobs, len(page.Jobs))
				mu.Unlock()
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return summarize(all), jobs, firstErr
}

// Bind measures submit-to-running on an idle cluster: one job at a time,
// polling its state every pollEvery.
func Bind(ctx context.Context, c *client.Client, samples int, pollEvery time.Duration) (Latencies, error) {
	var all []time.Duration
	for i := 0; i < samples; i++ {
		t0 := time.Now()
		acc, err := c.SubmitJob(ctx, api.JobRequest{Name: fmt.Sprintf("bind-%d", i), GPUs: 1, Topology: "node", GPUModel: "H100",
			Command: []string{"true"}}, "")
		if err != nil {
			return Latencies{}, err
		}
		if err := waitRunning(ctx, c, acc.JobID, pollEvery, 30*time.Second); err != nil {
			return Latencies{}, err
		}
		all = append(all, time.Since(t0))
		if _, err := c.CancelJob(ctx, acc.JobID); err != nil {
			return Latencies{}, err
		}
	}
	return summarize(all), nil
}

func waitRunning(ctx context.Context, c *client.Client, id string, every, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	state, last := model.JobState(""), error(nil)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		// A read that fails (a busy server) is tried again: the figure
		// is when the job runs, not whether one read got through.
		j, err := c.Job(ctx, id)
		if last = err; err == nil {
			if j.State == model.JobRunning {
				return nil
			}
			state = j.State
		}
		time.Sleep(every)
	}
	return fmt.Errorf("job %s not running after %s (state %q, last read error %v)", id, limit, state, last)
}

// Report prints a figure.
func Report(w io.Writer, name string, l Latencies) { fmt.Fprintf(w, "%-28s %s\n", name, l) }
