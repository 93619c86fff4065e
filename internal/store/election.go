package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is a won election: while it holds, its Writer's transactions
// apply; once the session's lease expires or it resigns, etcd refuses them.
type Leadership struct {
	s        *Store
	session  *concurrency.Session
	election *concurrency.Election
	key      string
	fence    int64
	id       string
}

// Campaign blocks until this process leads, even when it is alone, so
// that a second server started on the same table can never write beside
// it. ttl is the election lease: a crashed leader is replaced after it.
func (s *Store) Campaign(ctx context.Context, id string, ttl time.Duration) (*Leadership, error) {
	secs := int(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(secs))
	if err != nil {
		return nil, fmt.Errorf("election session: %w", err)
	}
	el := concurrency.NewElection(sess, s.prefix+electionDir)
	for {
		err := el.Campaign(ctx, id)
		if err == nil {
			break
		}
		// A timeout while waiting (etcd busy, a raft election) keeps our
		// key: campaigning again with the same session reuses it, so this
		// server keeps its place in line instead of going to the back.
		select {
		case <-sess.Done():
		default:
			if ctx.Err() == nil && Unavailable(err) {
				s.log.Debug("campaign interrupted; keeping our place", "err", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		sess.Close()
		return nil, fmt.Errorf("campaign: %w", err)
	}
	// In the background: waiting for the transfer would delay the new
	// leader by as long. The transfer drops proposals in flight; writers
	// retry those (store.Unavailable), the first admin token included.
	go s.shedRaftLeadership(ctx)
	return &Leadership{s: s, session: sess, election: el, key: el.Key(), fence: el.Rev(), id: id}, nil
}

// Fence is the leader key's create revision: unique and increasing across
// leaders, carried by every write and every order sent to agents.
func (l *Leadership) Fence() int64 { return l.fence }

// ID is the identity the leader campaigned with.
func (l *Leadership) ID() string { return l.id }

// Done is closed when the election lease is lost.
func (l *Leadership) Done() <-chan struct{} { return l.session.Done() }

// Resign gives up leadership so a follower need not wait for the lease.
func (l *Leadership) Resign(ctx context.Context) error {
	err := l.election.Resign(ctx)
	return errors.Join(err, l.session.Close())
}

// Writer returns the writer bound to this leadership's fence.
func (l *Leadership) Writer() *Writer {
	return &Writer{s: l.s, fenceKey: l.key, fence: l.fence}
}

// Leader reports who leads now (empty if nobody) and its fence.
func (s *Store) Leader(ctx context.Context) (string, int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix+electionDir, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, err
	}
	if len(resp.Kvs) == 0 {
		return "", 0, nil
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision, nil
}

// shedRaftLeadership moves etcd's raft leadership off this member when
// this server has just become berth's leader. If both ran in one process,
// killing it would cost a raft election, after which etcd renews every
// lease to its full TTL: the election key of the dead leader would outlive
// it by a TTL more. Apart, a crashed berth leader is replaced within one
// TTL. Best effort: a member that cannot take over is skipped.
func (s *Store) shedRaftLeadership(ctx context.Context) {
	if s.etcd == nil {
		return
	}
	srv := s.etcd.Server
	if srv.Leader() != srv.MemberID() {
		return
	}
	for _, m := range srv.Cluster().Members() {
		if m.ID == srv.MemberID() || m.IsLearner {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := srv.MoveLeader(mctx, srv.Lead(), uint64(m.ID))
		cancel()
		if err == nil {
			s.log.Info("moved etcd raft leadership off the berth leader", "to", m.Name)
			return
		}
		s.log.Debug("raft leadership transfer refused", "to", m.Name, "err", err)
	}
}
