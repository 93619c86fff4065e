package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/berthsched/berth/internal/client"
	"github.com/berthsched/berth/internal/model"
)

// `berth job logs` reaches an allocation's log through the server: the
// agent holds a long poll open to the leader (POST /v1/agent/logs/poll),
// the server hands it the log requests users made for this node, and the
// agent posts each answer back (POST /v1/agent/logs/reply). The agent
// only ever dials out, the same way its heartbeats do, so no node needs a
// port open to the servers and the agent's node token is the only
// credential involved. Kubernetes and Nomad dial the node instead
// (kubelet's and the Nomad client's own listeners); that needs each node
// reachable and authenticated from every server, which berth's agents
// are not.

// sizeSample is a log file's size at one instant: `--since` finds the
// offset output written after a time starts at from these.
type sizeSample struct {
	at   time.Time
	size int64
}

// maxSamples bounds the samples kept per stream; past it every other one
// is dropped, so the span stays and the resolution halves.
const maxSamples = 4096

// sample records a stream's size when it changed (called every second by
// the supervisor, after the cap); a rotation starts the samples over.
func (p *alloc) sample(stream int, size int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sizes[stream]
	switch {
	case len(s) > 0 && size < s[len(s)-1].size:
		s = s[:0]
	case len(s) > 0 && size == s[len(s)-1].size:
		return
	}
	s = append(s, sizeSample{at: now, size: size})
	if len(s) > maxSamples {
		k := 0
		for i := 0; i < len(s); i += 2 {
			s[k] = s[i]
			k++
		}
		s = s[:k]
	}
	p.sizes[stream] = s
}

// sinceOffset is where output written at or after t starts, from the
// samples; ok is false without samples (an allocation this process did
// not supervise from the start of its log).
func (p *alloc) sinceOffset(stream int, t time.Time) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sizes[stream]
	if len(s) == 0 {
		return 0, false
	}
	var prev int64
	for _, x := range s {
		if !x.at.Before(t) {
			return prev, true
		}
		prev = x.size
	}
	return prev, true
}

func streamIndex(name string) (int, bool) {
	switch name {
	case model.LogStdout:
		return 0, true
	case model.LogStderr:
		return 1, true
	}
	return 0, false
}

// readLog answers one log request from the allocation's files.
func (a *Agent) readLog(req model.LogRequest) model.LogChunk {
	out := model.LogChunk{ID: req.ID}
	stream, ok := streamIndex(req.Stream)
	if !ok {
		out.Error = fmt.Sprintf("stream %q: want stdout or stderr", req.Stream)
		return out
	}
	if req.Alloc == "" || filepath.Base(req.Alloc) != req.Alloc || req.Alloc == "." || req.Alloc == ".." {
		out.Error = fmt.Sprintf("allocation %q: not an allocation id", req.Alloc)
		return out
	}
	dir := a.state.allocDir(req.Alloc)
	if _, err := os.Stat(dir); err != nil {
		out.Error = fmt.Sprintf("node %s keeps no log of allocation %s: it never ran here, or its log passed the node's retention", a.cfg.NodeID, req.Alloc)
		return out
	}
	a.mu.Lock()
	p := a.allocs[req.Alloc]
	a.mu.Unlock()
	out.Done = p == nil || p.exited()
	f, err := os.Open(filepath.Join(dir, req.Stream+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return out // nothing written (a hold, or a start that failed early)
	}
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Size = st.Size()
	max := req.Max
	if max <= 0 || max > model.MaxLogChunk {
		max = model.MaxLogChunk
	}
	start := req.Offset
	switch {
	case start > out.Size:
		// The file was cut at its cap below where the reader was.
		start, out.Rotated = 0, true
	case start < 0:
		start = 0
		if !req.Since.IsZero() {
			if off, ok := p.sinceOffsetOf(stream, req.Since); ok {
				start = off
			} else if st.ModTime().Before(req.Since) {
				start = out.Size // not written to since then
			}
		}
		if req.Tail > 0 {
			start = max64(start, tailStart(f, out.Size, req.Tail))
		}
	}
	start = min(start, out.Size)
	buf := make([]byte, min(int64(max), out.Size-start))
	n, err := f.ReadAt(buf, start)
	if err != nil && !errors.Is(err, io.EOF) {
		out.Error = err.Error()
		return out
	}
	out.Offset, out.Data = start, buf[:n]
	return out
}

// sinceOffsetOf is sinceOffset on an allocation the agent may not hold.
func (p *alloc) sinceOffsetOf(stream int, t time.Time) (int64, bool) {
	if p == nil {
		return 0, false
	}
	return p.sinceOffset(stream, t)
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// tailStart is the offset of the last n lines of a file of size bytes,
// looking back at most MaxLogChunk bytes (a tail is one chunk).
func tailStart(f *os.File, size int64, n int) int64 {
	from := max64(0, size-model.MaxLogChunk)
	buf := make([]byte, size-from)
	k, _ := f.ReadAt(buf, from)
	buf = buf[:k]
	end := len(buf)
	if end > 0 && buf[end-1] == '\n' {
		end-- // the last line's own newline
	}
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(buf[:end], '\n')
		if j < 0 {
			return from
		}
		end = j
	}
	return from + int64(end) + 1
}

// pollLogs answers log requests until ctx ends. It polls the server the
// heartbeats last reached, and follows a not-leader answer's hint.
func (a *Agent) pollLogs(ctx context.Context) {
	var c *client.Client
	var hint string
	sweep := time.Now()
	a.sweepLogs()
	for ctx.Err() == nil {
		if time.Since(sweep) > time.Hour {
			sweep = time.Now()
			a.sweepLogs()
		}
		switch {
		case hint != "":
			c, hint = client.New(hint, a.cfg.Token), ""
		case c == nil:
			c = a.leader.Load()
		}
		if c == nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		reqs, err := c.LogPoll(ctx, model.LogPoll{NodeID: a.cfg.NodeID})
		if err != nil {
			var se *client.StatusError
			if errors.As(err, &se) && se.Body.Leader != "" {
				hint = se.Body.Leader
			} else {
				c = nil // back to the heartbeats' server
			}
			sleepCtx(ctx, time.Second)
			continue
		}
		for _, req := range reqs.Requests {
			ch := a.readLog(req)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := c.LogReply(rctx, ch); err != nil {
				a.log.Warn("log answer not delivered", "alloc", req.Alloc, "err", err)
			}
			cancel()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// sweepLogs removes the directories of allocations the control plane
// released more than LogRetention ago: their logs go with them.
func (a *Agent) sweepLogs() {
	root := filepath.Dir(a.state.allocDir("x"))
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		st, err := os.Stat(filepath.Join(dir, releasedFile))
		if err != nil || time.Since(st.ModTime()) < a.cfg.LogRetention {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			a.log.Warn("old allocation directory not removed", "dir", dir, "err", err)
		}
	}
}
