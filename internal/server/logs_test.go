package server

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
)

// TestLogQuery: every bad log parameter is a 400 naming it.
func TestLogQuery(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for q, field := range map[string]string{
		"stream=stdin": "stream", "stream=../x": "stream", "replica=-1": "replica", "replica=x": "replica",
		"replica=99999999999": "replica", "follow=maybe": "follow", "tail=-3": "tail", "tail=1e9": "tail",
		"since=yesterday": "since", "since=-5m": "since",
	} {
		v, _ := url.ParseQuery(q)
		_, err := parseLogQuery(v, now)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != "invalid" || ae.Field != field {
			t.Errorf("%s: %v, want invalid naming %s", q, err, field)
		}
	}
	v, _ := url.ParseQuery("stream=stderr&replica=3&follow=1&tail=20&since=90s")
	lq, err := parseLogQuery(v, now)
	if err != nil || lq.stream != "stderr" || lq.replica != 3 || !lq.follow || lq.tail != 20 || !lq.since.Equal(now.Add(-90*time.Second)) {
		t.Fatalf("%+v %v", lq, err)
	}
	v, _ = url.ParseQuery("since=2026-12-01T08:00:00Z")
	if lq, err := parseLogQuery(v, now); err != nil || lq.since.Hour() != 8 || lq.stream != "stdout" {
		t.Fatalf("since as a time: %+v %v", lq, err)
	}
}

// TestLogReadsPerToken: a token's open reads are capped, others' are not.
func TestLogReadsPerToken(t *testing.T) {
	h := newLogHub()
	for i := 0; i < maxReadsPerToken; i++ {
		if !h.open("t1") {
			t.Fatalf("read %d refused", i+1)
		}
	}
	if h.open("t1") {
		t.Fatal("a read past the cap was let through")
	}
	if !h.open("t2") {
		t.Fatal("another token refused because of t1")
	}
	h.close("t1")
	if !h.open("t1") {
		t.Fatal("a read refused after one ended")
	}
}
