package devstack

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/client"
)

// Demo is the mix `berth dev --demo` runs: a 32-GPU pod gang, sweeps of
// 1-GPU jobs that keep arriving, an 8-GPU fine-tune, and two inference
// deployments whose desired replicas follow a compressed day.
type Demo struct {
	// Day is how long the autoscaler's diurnal cycle takes.
	Day time.Duration
	// SweepEvery is how often a new sweep of 1-GPU jobs arrives.
	SweepEvery time.Duration
}

// train is a stand-in training command of the given length.
func (s *Stack) train(steps int, stepTime time.Duration) []string {
	return []string{s.cfg.Berth, "workload", "train", "--steps", fmt.Sprint(steps), "--step-time", stepTime.String(), "--checkpoint-every", "20"}
}

// RunDemo submits the mix (idempotently: a restart does not resubmit) and
// keeps the sweeps and the autoscaler going until the stack stops.
func (s *Stack) RunDemo(ctx context.Context, d Demo) error {
	if d.Day == 0 {
		d.Day = 10 * time.Minute
	}
	if d.SweepEvery == 0 {
		d.SweepEvery = 45 * time.Second
	}
	ck := s.cfg.DataDir + "/checkpoints"
	jobs := []api.JobRequest{
		// Declared runtimes let a waiting gang's reservation know when its
		// GPUs free up, so short work can backfill it.
		{Name: "pretrain-32", Org: "ml", Team: "research", GPUs: 32, Topology: "pod", Priority: 50, Preemptible: true, MaxRuntime: "2h",
			Checkpoint: &api.CheckpointRequest{Path: ck + "/pretrain-32", Bytes: 200e9}, Command: s.train(3600, time.Second)},
		{Name: "finetune-8", Org: "ml", Team: "nlp", GPUs: 8, Topology: "node", Priority: 40, Preemptible: true, MaxRuntime: "40m",
			Checkpoint: &api.CheckpointRequest{Path: ck + "/finetune-8", Bytes: 40e9}, Command: s.train(1200, time.Second)},
	}
	for _, j := range jobs {
		if _, err := s.API.SubmitJob(ctx, j, "demo-"+j.Name); err != nil {
			return fmt.Errorf("demo job %s: %w", j.Name, err)
		}
	}
	serve := []string{s.cfg.Berth, "workload", "serve"}
	for _, dep := range []api.DeploymentRequest{
		{Name: "chat", Model: "chat-70b", Team: "serving", ReplicaShape: api.ReplicaShape{GPUs: 4, Topology: "node"}, MinReplicas: 2, MaxReplicas: 6, Command: serve},
		{Name: "embed", Model: "embed-1b", Team: "serving", ReplicaShape: api.ReplicaShape{GPUs: 1, Topology: "node"}, MinReplicas: 2, MaxReplicas: 8, Command: serve},
	} {
		err := s.API.Do(ctx, http.MethodPost, "/v1/deployments", dep, nil)
		var se *client.StatusError
		if err != nil && !(errors.As(err, &se) && se.Status == http.StatusConflict) {
			return fmt.Errorf("demo deployment %s: %w", dep.Name, err)
		}
	}
	s.Go(func(ctx context.Context) { s.sweeps(ctx, d.SweepEvery) })
	for _, name := range []string{"chat", "embed"} {
		tok, err := s.API.CreateToken(ctx, "autoscaler:"+name, "demo autoscaler")
		if err != nil {
			return err
		}
		c := client.New(s.Addr, tok.Secret)
		s.Go(func(ctx context.Context) { autoscale(ctx, c, name, d.Day) })
	}
	return nil
}

// sweeps submits a sweep of 1-GPU jobs now and then, each a few minutes
// long: the churn that fragments a fleet.
func (s *Stack) sweeps(ctx context.Context, every time.Duration) {
	for n := 0; ; n++ {
		for i := range 8 {
			j := api.JobRequest{Name: fmt.Sprintf("sweep-%d-%d", n, i), Org: "ml", Team: "research", GPUs: 1, Topology: "node",
				Priority: 10, Preemptible: true, MaxRuntime: "10m",
				Checkpoint: &api.CheckpointRequest{Path: s.cfg.DataDir + "/checkpoints/sweeps", Bytes: 1e9},
				Command:    s.train(60+30*(i%5), time.Second)}
			if _, err := s.API.SubmitJob(ctx, j, ""); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("demo sweep", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// autoscale sets desired replicas on a sine over a compressed day, the
// way a real autoscaler follows diurnal traffic, through the API with the
// deployment's own autoscaler token.
func autoscale(ctx context.Context, c *client.Client, name string, day time.Duration) {
	start := time.Now()
	for {
		var d api.Deployment
		if err := c.Do(ctx, http.MethodGet, "/v1/deployments/"+name, nil, &d); err == nil {
			phase := 2 * math.Pi * float64(time.Since(start)%day) / float64(day)
			want := d.MinReplicas + int(math.Round(float64(d.MaxReplicas-d.MinReplicas)*(0.5-0.5*math.Cos(phase))))
			if want != d.Desired {
				_, _ = c.Scale(ctx, name, want)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(day / 60):
		}
	}
}
