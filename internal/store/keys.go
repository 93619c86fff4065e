package store

import "strings"

// Kind names one table: keys are <prefix><kind>/<id>.
type Kind string

const (
	Nodes       Kind = "nodes"
	Jobs        Kind = "jobs"
	Deployments Kind = "deployments"
	Allocations Kind = "allocations"
	Quotas      Kind = "quotas"
	Alerts      Kind = "alerts"
	Tokens      Kind = "tokens"
	Idempotency Kind = "idempotency"
	// Usage holds finished work's accounting records (model.UsageRecord).
	Usage Kind = "usage"
	// History holds the dashboard's samples of the fleet (model.Sample).
	History Kind = "history"
	// Docs holds the scheduler's single documents: reservations,
	// relocations, recent preemptions, configuration overrides.
	Docs Kind = "docs"
)

// kinds are the cached tables. The election lives under its own prefix
// and is not cached.
var kinds = []Kind{Nodes, Jobs, Deployments, Allocations, Quotas, Alerts, Tokens, Idempotency, Docs, Usage, History}

const electionDir = "election/"

func (s *Store) key(k Kind, id string) string { return s.prefix + string(k) + "/" + id }

// split parses a key into kind and id; ok is false for keys outside the
// cached tables.
func (s *Store) split(key string) (Kind, string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix)
	if !ok {
		return "", "", false
	}
	k, id, ok := strings.Cut(rest, "/")
	if !ok {
		return "", "", false
	}
	for _, c := range kinds {
		if string(c) == k {
			return c, id, true
		}
	}
	return "", "", false
}
