package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The decoders take bytes from the network. For any input they must not
// panic; every error is an *api.Error of code invalid with a message; and
// whatever they accept must be a valid object that survives a round trip.
// Seeds live in testdata/fuzz/<FuzzName>/.

func checkErr(t *testing.T, what string, err error) {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %T %v is not an *api.Error", what, err, err)
	}
	if e.Code != "invalid" || e.Message == "" {
		t.Fatalf("%s: error %+v: want code invalid and a message", what, e)
	}
}

// roundTrip re-encodes an accepted value and decodes it again: the
// decoder must accept its own output and read back the same value.
func roundTrip[T any](t *testing.T, v *T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encoding %+v: %v", v, err)
	}
	var again T
	if err := api.Decode(bytes.NewReader(b), &again); err != nil {
		t.Fatalf("decoding its own encoding %s: %v", b, err)
	}
	if diff := cmp.Diff(*v, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("round trip of %s (-first +again):\n%s", b, diff)
	}
}

func FuzzJobRequest(f *testing.F) {
	f.Add([]byte(`{"name":"train","gpus":8,"topology":"node","command":["python","train.py"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r api.JobRequest
		if err := api.Decode(bytes.NewReader(data), &r); err != nil {
			checkErr(t, "decode", err)
			return
		}
		roundTrip(t, &r)
		j, err := r.Job("j-fuzz")
		if err != nil {
			checkErr(t, "Job", err)
			return
		}
		if err := j.Validate(); err != nil {
			t.Fatalf("accepted %s but the job does not validate: %v", data, err)
		}
		if j.ID != "j-fuzz" || j.Shape.GPUs != r.GPUs || j.Shape.GPUs < 1 || string(j.Shape.Topology) != r.Topology ||
			j.Name != r.Name || j.Preemptible != r.Preemptible || j.Priority != r.Priority {
			t.Fatalf("accepted %s as a different job: %+v", data, j)
		}
		if j.Priority < -api.MaxPriority || j.Priority > api.MaxPriority {
			t.Fatalf("accepted priority %d", j.Priority)
		}
		if j.Preemptible && (j.Checkpoint == nil || j.Checkpoint.Path == "" || j.Checkpoint.SizeBytes <= 0) {
			t.Fatalf("accepted a preemptible job without a checkpoint: %s", data)
		}
		if j.MaxRuntime < 0 || j.Checkpoint != nil && j.Checkpoint.Interval < 0 {
			t.Fatalf("accepted a negative duration: %s", data)
		}
		if j.Team != "" && j.Org == "" {
			t.Fatalf("job of team %q without an org", j.Team)
		}
	})
}

func FuzzDeploymentRequest(f *testing.F) {
	f.Add([]byte(`{"name":"chat","model":"llama","replica_shape":{"gpus":1,"topology":"node"},"min_replicas":1,"max_replicas":4}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r api.DeploymentRequest
		if err := api.Decode(bytes.NewReader(data), &r); err != nil {
			checkErr(t, "decode", err)
			return
		}
		roundTrip(t, &r)
		d, err := r.Deployment()
		if err != nil {
			checkErr(t, "Deployment", err)
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted %s but the deployment does not validate: %v", data, err)
		}
		if d.ID != r.Name || d.ReplicaShape.GPUs < 1 || d.MinReplicas < 0 || d.MaxReplicas < d.MinReplicas || d.Desired < 0 {
			t.Fatalf("accepted %s as %+v", data, d)
		}
		if tg := d.Target(); tg < d.MinReplicas || tg > d.MaxReplicas {
			t.Fatalf("target %d outside [%d, %d]", tg, d.MinReplicas, d.MaxReplicas)
		}
		if d.Priority < -api.MaxPriority || d.Priority > api.MaxPriority {
			t.Fatalf("accepted priority %d", d.Priority)
		}
	})
}

func FuzzScaleRequest(f *testing.F) {
	f.Add([]byte(`{"desired_replicas":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r api.ScaleRequest
		if err := api.Decode(bytes.NewReader(data), &r); err != nil {
			checkErr(t, "decode", err)
			return
		}
		roundTrip(t, &r)
		if err := r.Validate(); err != nil {
			checkErr(t, "Validate", err)
			return
		}
		if r.Desired == nil || *r.Desired < 0 {
			t.Fatalf("accepted %s", data)
		}
	})
}

func FuzzHeartbeat(f *testing.F) {
	f.Add([]byte(`{"node_id":"n1","boot_epoch":1,"pod":"p1","model":"H100","gpus":8,"cpu_milli":1000,"memory_mib":1024}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h api.Heartbeat
		if err := api.Decode(bytes.NewReader(data), &h); err != nil {
			checkErr(t, "decode", err)
			return
		}
		roundTrip(t, &h)
		if err := api.ValidateHeartbeat(&h); err != nil {
			checkErr(t, "ValidateHeartbeat", err)
			return
		}
		// What the controller makes of an accepted report is a valid node.
		n := model.Node{ID: h.NodeID, Pod: h.Pod, Model: h.Model, GPUs: h.GPUs, CPUMilli: h.CPUMilli,
			MemoryMiB: h.MemoryMiB, Links: h.Links, BootEpoch: h.BootEpoch, Health: model.HealthHealthy}
		if err := n.Validate(); err != nil {
			t.Fatalf("accepted %s but its node does not validate: %v", data, err)
		}
		if h.BootEpoch == 0 || h.NodeID == "" || h.Model == "" {
			t.Fatalf("accepted %s without identity", data)
		}
		for _, f := range h.Faults {
			if f.GPU < -1 || f.GPU >= h.GPUs {
				t.Fatalf("accepted a fault on GPU %d of %d", f.GPU, h.GPUs)
			}
		}
		for _, a := range h.Allocations {
			if a.ID == "" {
				t.Fatalf("accepted an allocation without an id: %s", data)
			}
		}
	})
}

func FuzzTokenRequest(f *testing.F) {
	f.Add([]byte(`{"role":"team:ml/research","name":"ci","ttl":"720h"}`))
	f.Add([]byte(`{"role":"autoscaler:chat","ttl":"1s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r api.TokenRequest
		if err := api.Decode(bytes.NewReader(data), &r); err != nil {
			checkErr(t, "decode", err)
			return
		}
		ttl, err := r.Validate()
		if err != nil {
			checkErr(t, "validate", err)
			return
		}
		if ttl < 0 || ttl > api.MaxTokenTTL || strings.ContainsFunc(r.Name, api.Unprintable) {
			t.Fatalf("accepted ttl %v, name %q", ttl, r.Name)
		}
	})
}

// FuzzNames: a name CheckName accepts is printable, short, and safe as
// a path element; Escape never leaves an unprintable character.
func FuzzNames(f *testing.F) {
	f.Add("train-1")
	f.Add("a\u202eb")
	f.Add("..")
	f.Fuzz(func(t *testing.T, s string) {
		if api.CheckName("name", s, false) == nil {
			if len(s) > api.MaxNameLen || s == "." || s == ".." || strings.ContainsAny(s, "/\\ \x00") || strings.ContainsFunc(s, api.Unprintable) {
				t.Fatalf("accepted name %q", s)
			}
		}
		if e := api.Escape(s); strings.ContainsFunc(e, api.Unprintable) {
			t.Fatalf("Escape(%q) = %q still holds an unprintable character", s, e)
		}
	})
}
