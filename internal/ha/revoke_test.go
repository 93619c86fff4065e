package ha

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
)

// TestRevokedTokenRefusedEverywhere: a token revoked through a follower
// is refused by every server at the first request after the revoke
// returns (reads catch up with the table first), and a token past its
// expiry is refused by every server.
func TestRevokedTokenRefusedEverywhere(t *testing.T) {
	c := newCluster(t)
	leader, _, _ := c.waitLeader(nil, 30*time.Second)
	var follower *member
	for _, m := range c.members {
		if m != leader {
			follower = m
		}
	}
	make1 := func(ttl string) api.Token {
		st, body, _, err := request(follower.api, c.admin, http.MethodPost, "/v1/tokens", api.TokenRequest{Role: "team:t", TTL: ttl})
		if err != nil || st != http.StatusCreated {
			t.Fatalf("create a token via %s: %d %s %v", follower.name, st, body, err)
		}
		var tok api.Token
		json.Unmarshal(body, &tok)
		return tok
	}
	every := func(secret string, want int, what string) {
		t.Helper()
		for _, m := range c.members {
			if st, body, _, err := request(m.api, secret, http.MethodGet, "/v1/jobs", nil); err != nil || st != want {
				t.Fatalf("%s: GET /v1/jobs on %s: %d %s %v, want %d", what, m.name, st, body, err, want)
			}
		}
	}
	tok := make1("")
	every(tok.Secret, 200, "a new token")
	st, body, _, err := request(follower.api, c.admin, http.MethodDelete, "/v1/tokens/"+tok.ID, nil)
	if err != nil || st != 200 {
		t.Fatalf("revoke via %s: %d %s %v", follower.name, st, body, err)
	}
	every(tok.Secret, 401, "right after the revoke")

	short := make1("2s")
	every(short.Secret, 200, "a token within its ttl")
	time.Sleep(time.Until(*short.ExpiresAt) + 100*time.Millisecond)
	every(short.Secret, 401, "a token past its ttl")
}
