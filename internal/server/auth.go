package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/store"
)

// Role kinds.
const (
	RoleAdmin      = "admin"
	RoleTeam       = "team"
	RoleAutoscaler = "autoscaler"
	RoleAgent      = "agent"
)

// tokenRecord is a token as the table keeps it: never the secret, only
// its hash (the key).
type tokenRecord struct {
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Principal is who a request comes from.
type Principal struct {
	TokenID string
	Kind    string // admin, team, autoscaler, agent
	Scope   string // the team, deployment or node; empty for admin
}

func (p Principal) String() string {
	if p.Scope == "" {
		return p.Kind + "(" + p.TokenID + ")"
	}
	return p.Kind + ":" + p.Scope + "(" + p.TokenID + ")"
}

// Team is the org and team a team token acts for: team:<org>/<team>, or
// team:<team> in the org "default".
func (p Principal) Team() (org, team string) {
	if o, t, ok := strings.Cut(p.Scope, "/"); ok {
		return o, t
	}
	return "default", p.Scope
}

// Role is the principal's role string.
func (p Principal) Role() string {
	if p.Scope == "" {
		return p.Kind
	}
	return p.Kind + ":" + p.Scope
}

// ParseRole checks a role string.
func ParseRole(role string) (kind, scope string, err error) {
	kind, scope, _ = strings.Cut(role, ":")
	switch {
	case kind == RoleAdmin && scope == "":
		return kind, "", nil
	case (kind == RoleTeam || kind == RoleAutoscaler || kind == RoleAgent) && scope != "":
		return kind, scope, nil
	}
	return "", "", api.Invalid("role", "%q: expected admin, team:<name>, autoscaler:<deployment> or agent:<node>", role)
}

func hashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func newSecret() (string, string) {
	var b [24]byte
	rand.Read(b[:])
	var id [4]byte
	rand.Read(id[:])
	return "berth_" + hex.EncodeToString(b[:]), "t-" + hex.EncodeToString(id[:])
}

// authenticate resolves the bearer token, or nil.
func (s *Server) authenticate(r *http.Request) *Principal {
	// The scheme name is case-insensitive (RFC 9110 §11.1).
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil
	}
	hash := hashToken(secret)
	var e store.Entry
	found := false
	s.st.Cache().Read(func(v store.View) { e, found = v.Get(store.Tokens, hash) })
	if !found {
		return nil
	}
	// Decoded principals are kept per token revision: agents send
	// thousands of heartbeats a second with the same token.
	if c, ok := s.principals.Load(hash); ok && c.(cachedPrincipal).rev == e.ModRev {
		return c.(cachedPrincipal).p
	}
	var rec tokenRecord
	if json.Unmarshal(e.Value, &rec) != nil {
		return nil
	}
	kind, scope, err := ParseRole(rec.Role)
	if err != nil {
		return nil
	}
	p := &Principal{TokenID: rec.ID, Kind: kind, Scope: scope}
	s.principals.Store(hash, cachedPrincipal{rev: e.ModRev, p: p})
	return p
}

type cachedPrincipal struct {
	rev int64
	p   *Principal
}

type principalKey struct{}

func principal(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// forbidden is the 403 for a principal acting outside its scope.
func forbidden(p *Principal, need string) *api.Error {
	return &api.Error{Code: "forbidden", Scope: need,
		Message: fmt.Sprintf("token %s (role %s) may not do this: it needs %s", p.TokenID, p.Role(), need)}
}

// CreateToken makes a token for a role and returns its secret, which is
// not stored.
func (s *Server) CreateToken(ctx context.Context, role, name string) (api.Token, error) {
	if _, _, err := ParseRole(role); err != nil {
		return api.Token{}, err
	}
	w, err := s.ctl.Writer()
	if err != nil {
		return api.Token{}, err
	}
	secret, id := newSecret()
	rec := tokenRecord{ID: id, Role: role, Name: name, CreatedAt: time.Now().UTC()}
	if _, err := w.Commit(ctx, w.Txn().Create(store.Tokens, hashToken(secret), rec)); err != nil {
		return api.Token{}, err
	}
	return api.Token{ID: id, Role: role, Name: name, Secret: secret, CreatedAt: rec.CreatedAt}, nil
}

// bootstrap creates the first admin token when the table has none. The
// secret is returned once; the caller prints it and may save it.
func (s *Server) bootstrap(ctx context.Context) (string, error) {
	n := 0
	s.st.Cache().Read(func(v store.View) { n = v.Len(store.Tokens) })
	if n > 0 {
		return "", nil
	}
	w, err := s.ctl.Writer()
	if err != nil {
		return "", err
	}
	secret, id := newSecret()
	rec := tokenRecord{ID: id, Role: RoleAdmin, Name: "bootstrap", CreatedAt: time.Now().UTC()}
	// The bootstrap marker makes two racing first starts create one token.
	txn := w.Txn().Create(store.Docs, "bootstrap", map[string]string{"token_id": id}).
		Create(store.Tokens, hashToken(secret), rec)
	if _, err := w.Commit(ctx, txn); err != nil {
		return "", err
	}
	return secret, nil
}

// admin answers 403 unless the request comes from an admin.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) (*Principal, bool) {
	p := principal(r.Context())
	if p.Kind != RoleAdmin {
		s.fail(w, r, forbidden(p, "role admin"))
		return p, false
	}
	return p, true
}
