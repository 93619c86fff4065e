package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/model"
)

// Client talks to one berth server.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New builds a client for a server address (host:port or URL) and token.
func New(addr, token string) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &Client{base: strings.TrimRight(addr, "/"), token: token, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Status int
	Body   api.Error
}

func (e *StatusError) Error() string {
	msg := e.Body.Error()
	if e.Body.Scope != "" && e.Body.Code == "forbidden" {
		msg += " (missing scope: " + e.Body.Scope + ")"
	}
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), msg)
}

// ErrNoServer wraps connection failures with what to do about them.
var ErrNoServer = errors.New("no berth server answering")

// Do sends one request with a JSON body (nil for none) and decodes a JSON
// answer into out (nil to discard).
func (c *Client) Do(ctx context.Context, method, path string, body, out any, header ...string) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) || errors.Is(err, io.EOF) {
			return fmt.Errorf("%w at %s (%v): start one with `berth server` or `berth dev`, or point BERTH_ADDR at one", ErrNoServer, c.base, err)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
			eb.Error = api.Error{Code: "http", Message: strings.TrimSpace(string(data))}
		}
		return &StatusError{Status: resp.StatusCode, Body: eb.Error}
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

// LogPoll waits (up to the server's long-poll time) for log requests
// for an agent's node.
func (c *Client) LogPoll(ctx context.Context, p model.LogPoll) (model.LogRequests, error) {
	var out model.LogRequests
	err := c.Do(ctx, "POST", "/v1/agent/logs/poll", p, &out)
	return out, err
}

// LogReply posts an agent's answer to one log request.
func (c *Client) LogReply(ctx context.Context, ch model.LogChunk) error {
	return c.Do(ctx, "POST", "/v1/agent/logs/reply", ch, nil)
}

// SubmitJob posts a job; key, when set, is the Idempotency-Key.
func (c *Client) SubmitJob(ctx context.Context, j api.JobRequest, key string) (api.JobAccepted, error) {
	var out api.JobAccepted
	var h []string
	if key != "" {
		h = []string{"Idempotency-Key", key}
	}
	return out, c.Do(ctx, http.MethodPost, "/v1/jobs", j, &out, h...)
}

// Job reads one job.
func (c *Client) Job(ctx context.Context, id string) (api.Job, error) {
	var out api.Job
	return out, c.Do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &out)
}

// CancelJob cancels one job.
func (c *Client) CancelJob(ctx context.Context, id string) (api.Job, error) {
	var out api.Job
	return out, c.Do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil, &out)
}

// Scale sets a deployment's desired replicas.
func (c *Client) Scale(ctx context.Context, id string, desired int) (api.Deployment, error) {
	var out api.Deployment
	return out, c.Do(ctx, http.MethodPatch, "/v1/deployments/"+url.PathEscape(id), api.ScaleRequest{Desired: &desired}, &out)
}

// Topology reads the free-set view.
func (c *Client) Topology(ctx context.Context) (api.Topology, error) {
	var out api.Topology
	return out, c.Do(ctx, http.MethodGet, "/v1/cluster/topology", nil, &out)
}

// Heartbeat sends a node report and returns the orders.
func (c *Client) Heartbeat(ctx context.Context, h api.Heartbeat) (api.Orders, error) {
	var out api.Orders
	return out, c.Do(ctx, http.MethodPost, "/v1/agent/heartbeat", h, &out)
}

// CreateToken makes a token for a role.
func (c *Client) CreateToken(ctx context.Context, role, name string) (api.Token, error) {
	return c.NewToken(ctx, api.TokenRequest{Role: role, Name: name})
}

// NewToken makes a token as the request says (role, note, ttl).
func (c *Client) NewToken(ctx context.Context, req api.TokenRequest) (api.Token, error) {
	var out api.Token
	return out, c.Do(ctx, http.MethodPost, "/v1/tokens", req, &out)
}

// Tokens lists every token, never a secret (admin).
func (c *Client) Tokens(ctx context.Context) (api.TokenList, error) {
	var out api.TokenList
	return out, c.Do(ctx, http.MethodGet, "/v1/tokens", nil, &out)
}

// RevokeToken deletes a token by id (admin).
func (c *Client) RevokeToken(ctx context.Context, id string) (api.Token, error) {
	var out api.Token
	return out, c.Do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, &out)
}

// Stream copies a text answer (a log) to w as it arrives. It has no
// overall timeout, unlike Do: a follow lasts as long as ctx.
func (c *Client) Stream(ctx context.Context, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return fmt.Errorf("%w at %s (%v): start one with `berth server` or `berth dev`, or point BERTH_ADDR at one", ErrNoServer, c.base, err)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
			eb.Error = api.Error{Code: "http", Message: strings.TrimSpace(string(data))}
		}
		return &StatusError{Status: resp.StatusCode, Body: eb.Error}
	}
	_, err = io.Copy(w, resp.Body)
	if ctx.Err() != nil {
		return nil // the reader stopped following
	}
	return err
}
