package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/sched"
	"github.com/berthsched/berth/internal/store"
)

// maxBody caps request bodies; a job or heartbeat is a few KiB.
const maxBody = 1 << 20

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// writeCompact is writeJSON without the indentation, for pages of up to
// thousands of objects and for the heartbeat's orders: indenting a
// 500-job page took half its encoding time (BENCHMARKS.md, "Control
// plane at fleet scale").
func writeCompact(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// fail answers with the status and body an error deserves.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *api.Error
	var adm *sched.AdmissionError
	var conflict *control.ConflictError
	var quota *sched.QuotaError
	var idem *control.IdempotencyError
	status := http.StatusInternalServerError
	body := api.Error{Code: "internal", Message: err.Error()}
	switch {
	case errors.As(err, &ae):
		body = *ae
		status = map[string]int{"invalid": 400, "unauthorized": 401, "forbidden": 403, "quota": 403,
			"not_found": 404, "method_not_allowed": 405, "conflict": 409, "too_large": 413, "not_leader": 503, "unavailable": 503}[ae.Code]
		if status == 0 {
			status = 500
		}
	case errors.As(err, &quota):
		status, body = http.StatusForbidden, api.Error{Code: "quota", Field: "gpus", Message: quota.Message, Scope: quota.Scope}
	case errors.As(err, &adm):
		status, body = http.StatusBadRequest, api.Error{Code: "invalid", Field: requestField(adm.Field), Message: adm.Message}
	case errors.As(err, &idem):
		status, body = http.StatusUnprocessableEntity, api.Error{Code: "idempotency_mismatch", Field: "Idempotency-Key", Message: idem.Error()}
	case errors.As(err, &conflict):
		status, body = http.StatusConflict, api.Error{Code: "conflict", Message: conflict.Message}
	case errors.Is(err, control.ErrNotFound):
		status, body = http.StatusNotFound, api.Error{Code: "not_found", Message: "not found: " + api.Escape(r.URL.Path)}
	case store.Unavailable(err):
		status, body = http.StatusServiceUnavailable, *unavailable(err).(*api.Error)
	case errors.Is(err, store.ErrConflict):
		// The table kept changing under the write through every retry: a
		// busy leader, not a broken request. Say when to come back.
		w.Header().Set("Retry-After", "1")
		status, body = http.StatusServiceUnavailable, api.Error{Code: "unavailable",
			Message: "the table kept changing under this write (the leader is busy); retry in a second"}
	case errors.Is(err, control.ErrNotLeader), errors.Is(err, store.ErrFenced):
		leader, lerr := s.askLeader(r)
		status, body = http.StatusServiceUnavailable, api.Error{Code: "not_leader",
			Message: "this server is not the leader; retry against the leader", Leader: leader}
		if store.Unavailable(lerr) {
			// No leader can be found because etcd itself does not
			// answer (a lost quorum): say that, not "ask the leader".
			body = *unavailable(lerr).(*api.Error)
		}
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, api.ErrorBody{Error: body})
}

// requestField maps the core's field names onto the request's.
func requestField(f string) string {
	switch f {
	case "shape.gpus":
		return "gpus"
	case "shape.topology":
		return "topology"
	case "shape.models":
		return "gpu_model"
	case "shape.cpu_milli":
		return "cpu_milli"
	case "shape.memory_mib":
		return "memory_mib"
	}
	return f
}

// decode reads a capped, strict JSON body.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	return api.Decode(http.MaxBytesReader(w, r.Body, maxBody), v)
}
