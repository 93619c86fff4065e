package server

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/store"
)

// A write whose retries all met a changed table is a busy leader: the
// client is told to come back, not that the server broke.
func TestConflictAfterRetriesIsUnavailable(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := httptest.NewRecorder()
	s.fail(rec, httptest.NewRequest("POST", "/v1/agent/heartbeat", nil), fmt.Errorf("heartbeat: %w", store.ErrConflict))
	var body api.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || body.Error.Code != "unavailable" {
		t.Errorf("status %d, Retry-After %q, code %q; want 503, 1, unavailable", rec.Code, rec.Header().Get("Retry-After"), body.Error.Code)
	}
}
