package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
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
	ID        string     `json:"id"`
	Role      string     `json:"role"`
	Name      string     `json:"name,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// DeploymentUID binds an autoscaler token to one deployment's
	// immutable uid: a deployment made later under the same name is not
	// the one the token was given for.
	DeploymentUID string `json:"deployment_uid,omitempty"`
}

func (t *tokenRecord) view(now time.Time) api.Token {
	return api.Token{ID: t.ID, Role: t.Role, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
		Expired: t.ExpiresAt != nil && !now.Before(*t.ExpiresAt), DeploymentUID: t.DeploymentUID}
}

// Principal is who a request comes from.
type Principal struct {
	TokenID string
	Kind    string // admin, team, autoscaler, agent
	Scope   string // the team, deployment or node; empty for admin
	// DeploymentUID is the deployment an autoscaler token is bound to.
	DeploymentUID string
	expires       *time.Time
}

func (p Principal) String() string {
	if p.Scope == "" {
		return p.Kind + "(" + p.TokenID + ")"
	}
	return p.Kind + ":" + p.Scope + "(" + p.TokenID + ")"
}

// Team is the org and team a team token acts for: team:<org>/<team>, or
// team:<team> in the org "default".
func (p Principal) Team() (org, team string) { return splitTeam(p.Scope) }

// splitTeam reads a team scope: org/team, or team in the org "default".
func splitTeam(scope string) (org, team string) {
	if scope == "" {
		return "default", ""
	}
	return model.TeamOf(scope)
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
	var bad *api.Error
	switch {
	case kind == RoleAdmin && scope == "":
		return kind, "", nil
	case kind == RoleTeam && scope != "":
		bad = api.CheckTeam("role", scope)
	case kind == RoleAutoscaler && scope != "":
		bad = api.CheckName("role", scope, true)
	case kind == RoleAgent && scope != "":
		bad = api.CheckName("role", scope, false)
	default:
		return "", "", api.Invalid("role", "%s: expected admin, team:<name>, team:<org>/<team>, autoscaler:<deployment> or agent:<node>", api.Quote(role))
	}
	if bad != nil {
		return "", "", api.Invalid("role", "%s: the scope after %s: is not a name: %s", api.Quote(role), kind, bad.Message)
	}
	return kind, scope, nil
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

// authenticate resolves the bearer token, or says why it cannot. A
// revoked token is gone from the table, which every server's cache
// follows; an expired one is refused from the second it expires.
func (s *Server) authenticate(r *http.Request) (*Principal, string) {
	const unknown = "missing or unknown bearer token: send Authorization: Bearer <token> (berth token create, or the admin token berth server printed at first start)"
	// The scheme name is case-insensitive (RFC 9110 §11.1).
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, unknown
	}
	hash := hashToken(secret)
	var e store.Entry
	found := false
	s.st.Cache().Read(func(v store.View) { e, found = v.Get(store.Tokens, hash) })
	if !found {
		return nil, unknown
	}
	// Decoded principals are kept per token revision: agents send
	// thousands of heartbeats a second with the same token.
	var p *Principal
	if c, ok := s.principals.Load(hash); ok && c.(cachedPrincipal).rev == e.ModRev {
		p = c.(cachedPrincipal).p
	} else {
		var rec tokenRecord
		if json.Unmarshal(e.Raw(), &rec) != nil {
			return nil, unknown
		}
		kind, scope, err := ParseRole(rec.Role)
		if err != nil {
			return nil, unknown
		}
		p = &Principal{TokenID: rec.ID, Kind: kind, Scope: scope, DeploymentUID: rec.DeploymentUID, expires: rec.ExpiresAt}
		s.principals.Store(hash, cachedPrincipal{rev: e.ModRev, p: p})
	}
	if p.expires != nil && !time.Now().Before(*p.expires) {
		return nil, fmt.Sprintf("token %s expired at %s: ask an admin for a new one (berth token create --ttl)", p.TokenID, p.expires.Format(time.RFC3339))
	}
	return p, ""
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
// not stored. An autoscaler token is bound to the deployment as it is
// now (its uid), so the deployment must exist.
func (s *Server) CreateToken(ctx context.Context, req api.TokenRequest) (api.Token, error) {
	kind, scope, err := ParseRole(req.Role)
	if err != nil {
		return api.Token{}, err
	}
	ttl, err := req.Validate()
	if err != nil {
		return api.Token{}, err
	}
	w, err := s.ctl.Writer()
	if err != nil {
		return api.Token{}, err
	}
	secret, id := newSecret()
	now := time.Now().UTC()
	rec := tokenRecord{ID: id, Role: req.Role, Name: req.Name, CreatedAt: now}
	if ttl > 0 {
		t := now.Add(ttl)
		rec.ExpiresAt = &t
	}
	txn := w.Txn()
	if kind == RoleAutoscaler {
		var e store.Entry
		ok := false
		s.st.Cache().Read(func(v store.View) { e, ok = v.Get(store.Deployments, scope) })
		if !ok {
			return api.Token{}, api.Invalid("role", "%s: no deployment %s: an autoscaler token is bound to a deployment that exists (create it first)", api.Quote(req.Role), scope)
		}
		rec.DeploymentUID = e.Obj.(model.Deployment).UID
		// The deployment must still be that one when the token lands.
		txn.Unchanged(store.Deployments, scope, e.ModRev)
	}
	if _, err := w.Commit(ctx, txn.Create(store.Tokens, hashToken(secret), rec)); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return api.Token{}, &control.ConflictError{Message: "deployment " + scope + " changed while the token was made; try again"}
		}
		return api.Token{}, err
	}
	out := rec.view(now)
	out.Secret = secret
	return out, nil
}

// Tokens lists every token (never a secret), oldest first.
func (s *Server) Tokens() []api.Token {
	var out []api.Token
	now := time.Now()
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Tokens, func(_ string, e store.Entry) {
			var rec tokenRecord
			if json.Unmarshal(e.Raw(), &rec) == nil {
				out = append(out, rec.view(now))
			}
		})
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// RevokeToken deletes a token by its id. The last admin token that has
// not expired cannot be revoked: nothing could then make another.
func (s *Server) RevokeToken(ctx context.Context, id string) (api.Token, error) {
	var key string
	var rec tokenRecord
	admins := 0
	now := time.Now()
	s.st.Cache().Read(func(v store.View) {
		v.Each(store.Tokens, func(k string, e store.Entry) {
			var t tokenRecord
			if json.Unmarshal(e.Raw(), &t) != nil {
				return
			}
			if t.Role == RoleAdmin && !t.view(now).Expired {
				admins++
			}
			if t.ID == id {
				key, rec = k, t
			}
		})
	})
	if key == "" {
		return api.Token{}, control.ErrNotFound
	}
	if rec.Role == RoleAdmin && admins <= 1 && !rec.view(now).Expired {
		return api.Token{}, &control.ConflictError{Message: "token " + id + " is the last admin token: create another admin token before revoking it"}
	}
	w, err := s.ctl.Writer()
	if err != nil {
		return api.Token{}, err
	}
	if _, err := w.Commit(ctx, w.Txn().Delete(store.Tokens, key)); err != nil {
		return api.Token{}, err
	}
	return rec.view(now), nil
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
