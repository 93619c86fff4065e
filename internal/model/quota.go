package model

import (
	"fmt"
	"strings"
)

// Quota is one node of the quota tree (org → team → user), named by its
// path: "ml", "ml/nlp", "ml/nlp/alice". Use within GuaranteedGPUs is never
// preempted; use beyond it, up to MaxGPUs, is borrowed idle capacity,
// tracked as such and always preemptible (§4).
type Quota struct {
	Scope          string `json:"scope"`
	GuaranteedGPUs int    `json:"guaranteed_gpus"`
	// MaxGPUs caps the scope's use; 0 means no cap.
	MaxGPUs int `json:"max_gpus,omitempty"`
}

// MaxQuotaGPUs bounds a quota far above any fleet and far below where
// the quota arithmetic could overflow.
const MaxQuotaGPUs = 100_000_000

// Validate checks the quota's fields.
func (q *Quota) Validate() error {
	parts := strings.Split(q.Scope, "/")
	if q.Scope == "" || len(parts) > 3 {
		return fmt.Errorf("scope: %q must be org, org/team or org/team/user", q.Scope)
	}
	for _, p := range parts {
		if p == "" {
			return fmt.Errorf("scope: %q has an empty part", q.Scope)
		}
	}
	if q.GuaranteedGPUs < 0 || q.GuaranteedGPUs > MaxQuotaGPUs {
		return fmt.Errorf("guaranteed_gpus: %d: expected 0 to %d", q.GuaranteedGPUs, MaxQuotaGPUs)
	}
	if q.MaxGPUs > MaxQuotaGPUs {
		return fmt.Errorf("max_gpus: %d: expected 0 (no cap) to %d", q.MaxGPUs, MaxQuotaGPUs)
	}
	if q.MaxGPUs < 0 || (q.MaxGPUs > 0 && q.MaxGPUs < q.GuaranteedGPUs) {
		return fmt.Errorf("max_gpus: %d must be 0 (no cap) or at least guaranteed_gpus (%d)", q.MaxGPUs, q.GuaranteedGPUs)
	}
	return nil
}
