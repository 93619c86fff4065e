package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berthsched/berth/internal/api"
	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// Logs travel agent → leader → user: a user's request is queued on the
// leader for the node, the node's agent takes it with its long poll and
// posts the bytes back (agent/logs.go says why the agent dials out). A
// follower forwards log reads to the leader, streaming.

// logPollWait is how long an agent's log poll is held open with nothing
// to ask: below the client's 30 s timeout.
const logPollWait = 20 * time.Second

// logAnswerWait bounds the wait for one chunk from an agent.
const logAnswerWait = 10 * time.Second

// maxQueuedLogReads bounds the reads waiting for one node, so readers
// cannot pile work on an agent that is slow to poll.
const maxQueuedLogReads = 64

// maxReadsPerToken bounds the log reads (follows included) one token has
// open at once, on the server that serves them.
const maxReadsPerToken = 8

// followEvery is how often a follow asks the agent for what is new.
const followEvery = 500 * time.Millisecond

// logHub holds the log requests waiting for each node's agent and the
// users waiting for their answers. It lives in memory on the leader: a
// leader change drops what is in flight, and the user's request fails
// with a retry, as a forwarded write would.
type logHub struct {
	mu      sync.Mutex
	queue   map[string][]model.LogRequest // by node
	wake    map[string]chan struct{}      // a node's poll, waiting
	answers map[string]chan model.LogChunk
	node    map[string]string // request id → node, so only it may answer
	reading map[string]int    // open log reads by token id
}

func newLogHub() *logHub {
	return &logHub{queue: map[string][]model.LogRequest{}, wake: map[string]chan struct{}{},
		answers: map[string]chan model.LogChunk{}, node: map[string]string{}, reading: map[string]int{}}
}

// ask queues a request for node and waits for its answer.
func (h *logHub) ask(ctx context.Context, node string, req model.LogRequest) (model.LogChunk, error) {
	_, req.ID = newSecret()
	ans := make(chan model.LogChunk, 1)
	h.mu.Lock()
	if len(h.queue[node]) >= maxQueuedLogReads {
		h.mu.Unlock()
		return model.LogChunk{}, &api.Error{Code: "unavailable",
			Message: fmt.Sprintf("%d log reads already wait for node %s's agent: retry", maxQueuedLogReads, node)}
	}
	h.queue[node] = append(h.queue[node], req)
	h.answers[req.ID], h.node[req.ID] = ans, node
	if w, ok := h.wake[node]; ok {
		close(w)
		delete(h.wake, node)
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.answers, req.ID)
		delete(h.node, req.ID)
		q := h.queue[node]
		for i := range q {
			if q[i].ID == req.ID { // never taken: the agent is not polling
				h.queue[node] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		h.mu.Unlock()
	}()
	t := time.NewTimer(logAnswerWait)
	defer t.Stop()
	select {
	case c := <-ans:
		return c, nil
	case <-t.C:
		return model.LogChunk{}, &api.Error{Code: "unavailable",
			Message: fmt.Sprintf("the agent on node %s did not answer for its log within %s: is it running, and on a berth version that serves logs?", node, logAnswerWait)}
	case <-ctx.Done():
		return model.LogChunk{}, ctx.Err()
	}
}

// open counts a log read for a token; false past maxReadsPerToken, so
// one tenant's follows cannot fill a shared node's queue (and refuse
// every other team's reads there).
func (h *logHub) open(token string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reading[token] >= maxReadsPerToken {
		return false
	}
	h.reading[token]++
	return true
}

func (h *logHub) close(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reading[token]--; h.reading[token] <= 0 {
		delete(h.reading, token)
	}
}

// poll waits for requests for node, up to logPollWait.
func (h *logHub) poll(ctx context.Context, node string) []model.LogRequest {
	deadline := time.NewTimer(logPollWait)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		if q := h.queue[node]; len(q) > 0 {
			delete(h.queue, node)
			h.mu.Unlock()
			return q
		}
		w, ok := h.wake[node]
		if !ok {
			w = make(chan struct{})
			h.wake[node] = w
		}
		h.mu.Unlock()
		select {
		case <-w:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// answer delivers a chunk; false when no one asked node for it.
func (h *logHub) answer(node string, c model.LogChunk) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ans, ok := h.answers[c.ID]
	if !ok || h.node[c.ID] != node {
		return false
	}
	select {
	case ans <- c:
	default:
	}
	return true
}

// agentFor checks that p is the agent of node (or an admin).
func agentFor(p *Principal, node string) bool {
	return p.Kind == RoleAdmin || p.Kind == RoleAgent && p.Scope == node
}

func (s *Server) logPoll(w http.ResponseWriter, r *http.Request) {
	var req model.LogPoll
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p := principal(r.Context())
	if !agentFor(p, req.NodeID) {
		s.fail(w, r, forbidden(p, "agent:"+req.NodeID))
		return
	}
	if !s.ctl.Leading() {
		s.fail(w, r, control.ErrNotLeader) // carries the leader to poll instead
		return
	}
	writeJSON(w, 200, model.LogRequests{Requests: append([]model.LogRequest{}, s.logs.poll(r.Context(), req.NodeID)...)})
}

func (s *Server) logReply(w http.ResponseWriter, r *http.Request) {
	var c model.LogChunk
	if err := decode(w, r, &c); err != nil {
		s.fail(w, r, err)
		return
	}
	p := principal(r.Context())
	if p.Kind != RoleAgent {
		s.fail(w, r, forbidden(p, "agent:<node>"))
		return
	}
	if !s.logs.answer(p.Scope, c) {
		s.fail(w, r, &api.Error{Code: "not_found", Message: "no log request " + api.Quote(c.ID) + " is waiting for this node"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// logQuery is a log read's parameters, checked.
type logQuery struct {
	stream  string
	replica int
	follow  bool
	tail    int
	since   time.Time
}

func parseLogQuery(q url.Values, now time.Time) (logQuery, error) {
	lq := logQuery{stream: model.LogStdout}
	if v := q.Get("stream"); v != "" {
		if v != model.LogStdout && v != model.LogStderr {
			return lq, api.Invalid("stream", "%s", "stdout or stderr, not "+api.Quote(v))
		}
		lq.stream = v
	}
	if v := q.Get("replica"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > api.MaxReplicas {
			return lq, api.Invalid("replica", "%s", fmt.Sprintf("a whole number 0-%d, not %s", api.MaxReplicas, api.Quote(v)))
		}
		lq.replica = n
	}
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return lq, api.Invalid("follow", "%s", "true or false, not "+api.Quote(v))
		}
		lq.follow = b
	}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100000 {
			return lq, api.Invalid("tail", "%s", "a number of lines 0-100000, not "+api.Quote(v))
		}
		lq.tail = n
	}
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v, now)
		if err != nil {
			return lq, err
		}
		lq.since = t
	}
	return lq, nil
}

func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request) {
	j, ok := s.ownedJob(w, r)
	if !ok {
		return
	}
	lq, err := parseLogQuery(r.URL.Query(), time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ran := j.Run().Ran
	if len(ran) == 0 {
		s.fail(w, r, &api.Error{Code: "conflict", Message: fmt.Sprintf("job %s has not started: it has no log yet", j.ID)})
		return
	}
	if lq.replica >= len(ran) {
		s.fail(w, r, api.Invalid("replica", "%s", fmt.Sprintf("0-%d: job %s's latest run has %d allocation(s)", len(ran)-1, j.ID, len(ran))))
		return
	}
	s.streamLog(w, r, ran[lq.replica], lq)
}

func (s *Server) deploymentLogs(w http.ResponseWriter, r *http.Request) {
	d, ok := s.ownedDeployment(w, r, false) // an autoscaler scales; it reads no logs
	if !ok {
		return
	}
	lq, err := parseLogQuery(r.URL.Query(), time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var allocs []model.Allocation
	s.st.Cache().Read(func(v store.View) { allocs = v.AllocationsOf(d.ID) })
	// The replica's newest allocation: a relocation runs the new one
	// beside the old until it is ready.
	sort.Slice(allocs, func(a, b int) bool { return allocs[a].CreatedAt.After(allocs[b].CreatedAt) })
	for _, a := range allocs {
		if a.Replica == lq.replica {
			s.streamLog(w, r, model.AllocRef{ID: a.ID, NodeID: a.NodeID}, lq)
			return
		}
	}
	var have []string
	for _, a := range allocs {
		have = append(have, strconv.Itoa(a.Replica))
	}
	s.fail(w, r, api.Invalid("replica", "%s", fmt.Sprintf("a running replica of %s (%s), not %d", d.ID, orNone(have), lq.replica)))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none runs"
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// streamLog writes an allocation's log as text: what is kept (or its
// tail), and with follow what is written after, until the process ends
// or the reader goes. The first chunk is fetched before anything is
// written, so a failure is still a JSON error with its status.
func (s *Server) streamLog(w http.ResponseWriter, r *http.Request, at model.AllocRef, lq logQuery) {
	if !s.ctl.Leading() && r.Header.Get(forwardedHeader) == "" {
		s.forwardStream(w, r)
		return
	}
	if !s.ctl.Leading() {
		s.fail(w, r, control.ErrNotLeader)
		return
	}
	tok := principal(r.Context()).TokenID
	if !s.logs.open(tok) {
		s.fail(w, r, &api.Error{Code: "unavailable", Message: fmt.Sprintf("this token already has %d log reads open: end one (a follow ends with its reader)", maxReadsPerToken)})
		return
	}
	defer s.logs.close(tok)
	ask := func(off int64) (model.LogChunk, error) {
		req := model.LogRequest{Alloc: at.ID, Stream: lq.stream, Offset: off, Tail: lq.tail, Since: lq.since}
		c, err := s.logs.ask(r.Context(), at.NodeID, req)
		if err == nil && c.Error != "" {
			err = &api.Error{Code: "not_found", Message: c.Error}
		}
		return c, err
	}
	c, err := ask(-1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Berth-Node", at.NodeID)
	w.Header().Set("Berth-Allocation", at.ID)
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	for {
		if _, err := w.Write(c.Data); err != nil {
			return
		}
		next := c.Offset + int64(len(c.Data))
		if next < c.Size {
			c, err = ask(next)
		} else {
			if !lq.follow || c.Done {
				return
			}
			_ = rc.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(followEvery):
			}
			c, err = ask(next)
		}
		if err != nil {
			fmt.Fprintf(w, "\n[berth] log interrupted: %v\n", err)
			return
		}
		if c.Rotated {
			fmt.Fprintf(w, "\n[berth] the log passed its size cap and was cut; what follows is what is kept\n")
		}
	}
}

// forwardStream proxies a log read to the leader with no forwarding
// timeout (leaderWrite's): a follow lasts as long as its reader. The
// proxy flushes each write.
func (s *Server) forwardStream(w http.ResponseWriter, r *http.Request) {
	leader := s.leaderHint(r)
	if leader == "" || leader == s.id || !strings.Contains(leader, "://") {
		s.fail(w, r, control.ErrNotLeader)
		return
	}
	s.proxy(leader).ServeHTTP(w, r)
}
