package server

import (
	"net/http"
	"net/http/pprof"
)

// profile serves Go's runtime profiles (net/http/pprof) to admin tokens
// only: a CPU profile of a busy server is how its hot paths are found
// (BENCHMARKS.md, "Control plane at fleet scale"), and a profile shows
// the table's ids, so no other role may take one.
func (s *Server) profile(w http.ResponseWriter, r *http.Request) {
	if p := principal(r.Context()); p.Kind != RoleAdmin {
		s.fail(w, r, forbidden(p, "role admin"))
		return
	}
	switch r.PathValue("name") {
	case "profile":
		pprof.Profile(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "":
		pprof.Index(w, r)
	default:
		pprof.Handler(r.PathValue("name")).ServeHTTP(w, r)
	}
}
