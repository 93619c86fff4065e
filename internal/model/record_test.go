package model

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestJobSize: a job stays within the 416-byte size class. The server
// keeps every job of its table decoded, a million of them at fleet
// scale; the next class up is 448, 32 MB more there. A field that is
// zero for a waiting job belongs in RunRecord or ResizeRecord.
func TestJobSize(t *testing.T) {
	if n := unsafe.Sizeof(Job{}); n > 416 {
		t.Fatalf("model.Job is %d bytes, over 416: put what a pending job does not have behind RunRecord or ResizeRecord", n)
	}
}

// TestRecordsKeepTheJSON: the fields behind the records read and write
// the JSON they did as the job's own, and a job without records writes
// none of them.
func TestRecordsKeepTheJSON(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	in := `{"id":"j1","shape":{"gpus":8,"topology":"node"},"priority":0,"preemptible":true,"state":"running",` +
		`"submitted_at":"2026-12-07T11:00:00Z","last_checkpoint_at":"2026-12-07T12:00:00Z","restore":"/ck/step-3",` +
		`"ran":[{"id":"a1","node_id":"n1"}],"gpu_seconds":360,"wait_seconds":12,` +
		`"resized_at":"2026-12-07T12:00:00Z","resizes":[{"at":"2026-12-07T12:00:00Z","from":4,"to":8,"why":"grow"}],"resize_count":3}`
	var j Job
	if err := json.Unmarshal([]byte(in), &j); err != nil {
		t.Fatal(err)
	}
	r, z := j.Run(), j.Resizing()
	if !r.LastCheckpointAt.Equal(at) || r.Restore != "/ck/step-3" || len(r.Ran) != 1 || r.Ran[0].NodeID != "n1" ||
		r.GPUSeconds != 360 || r.WaitSeconds != 12 {
		t.Fatalf("run record decoded as %+v", r)
	}
	if !z.ResizedAt.Equal(at) || len(z.Resizes) != 1 || z.Resizes[0].To != 8 || z.ResizeCount != 3 {
		t.Fatalf("resize record decoded as %+v", z)
	}
	out, err := json.Marshal(&j)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, j) {
		t.Fatalf("round trip changed the job:\n%s", out)
	}

	pending, err := json.Marshal(&Job{ID: "j2", State: JobPending, SubmittedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"last_checkpoint_at", "restore", "ran", "gpu_seconds", "wait_seconds", "resized_at", "resizes", "resize_count"} {
		if strings.Contains(string(pending), `"`+f+`"`) {
			t.Errorf("a pending job writes %q: %s", f, pending)
		}
	}
}

// TestEditsLeaveCopiesAlone: a job is often a shallow copy of a cached
// one. Changing the copy's records (EditRun, Resized) must leave the
// original's as they were, appended slices included.
func TestEditsLeaveCopiesAlone(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	orig := &Job{ID: "j", Elastic: &Elastic{MinGPUs: 8, MaxGPUs: 16}, Size: 8,
		RunRecord: &RunRecord{Restore: "/ck/1", Ran: make([]AllocRef, 1, 4), GPUSeconds: 10}}
	orig.Resized(at, 16, 8, "shrink")
	cp := *orig
	r := cp.EditRun()
	r.Restore, r.GPUSeconds = "/ck/2", 20
	r.Ran = append(r.Ran, AllocRef{ID: "a2", NodeID: "n2"})
	cp.Resized(at.Add(time.Minute), 8, 16, "grow")

	if o := orig.Run(); o.Restore != "/ck/1" || o.GPUSeconds != 10 || len(o.Ran) != 1 || o.Ran[:2][1].ID != "" {
		t.Fatalf("the original's run record changed: %+v (spare capacity %+v)", o, o.Ran[:2])
	}
	if z := orig.Resizing(); z.ResizeCount != 1 || len(z.Resizes) != 1 || z.Resizes[0].Why != "shrink" || orig.Size != 8 {
		t.Fatalf("the original's resizes changed: %+v, size %d", z, orig.Size)
	}
	if c := cp.Run(); c.Restore != "/ck/2" || len(c.Ran) != 2 {
		t.Fatalf("the copy's run record: %+v", c)
	}
	if z := cp.Resizing(); z.ResizeCount != 2 || len(z.Resizes) != 2 || cp.Size != 16 {
		t.Fatalf("the copy's resizes: %+v, size %d", z, cp.Size)
	}
	var none Job
	if none.Run().Restore != "" || none.Resizing().ResizeCount != 0 {
		t.Fatal("a job without records reads as zero")
	}
}
