package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
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
//
// It is etcd's election (concurrency.Election: one key per candidate
// under the prefix, bound to its session's lease; the lowest create
// revision leads) with every call to etcd bounded and retried.
// concurrency.Election.Campaign writes its key and waits with no deadline
// of its own, and a write in flight when raft leadership moves (a new
// berth leader sheds it at once, shedRaftLeadership) is dropped and
// answered only at etcd's request timeout, seven seconds later. A
// candidate caught so was not in line when the new leader died, and
// failover took a TTL plus those seconds.
func (s *Store) Campaign(ctx context.Context, id string, ttl time.Duration) (*Leadership, error) {
	secs := int(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(secs))
	if err != nil {
		return nil, fmt.Errorf("election session: %w", err)
	}
	pfx := s.prefix + electionDir + "/" // the layout concurrency.Election uses
	s.revokeOwn(ctx, pfx, id, sess.Lease())
	key, rev, err := s.enqueue(ctx, sess, pfx, id)
	if err == nil {
		err = s.waitTurn(ctx, sess, pfx, rev)
	}
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("campaign: %w", err)
	}
	// In the background: waiting for the transfer would delay the new
	// leader by as long. The transfer drops proposals in flight; writers
	// retry those (store.Unavailable), the first admin token included.
	go s.shedRaftLeadership(ctx)
	el := concurrency.ResumeElection(sess, pfx, key, rev)
	return &Leadership{s: s, session: sess, election: el, key: key, fence: rev, id: id}, nil
}

// revokeOwn ends the leases of election keys that hold this candidate's
// own id under another lease: this server's previous incarnation, killed
// before it could resign. Its lease would otherwise hold leadership for
// a whole TTL after a restart (a single server: no writes until then).
// The id is the server's advertised URL, which no other live server can
// share, so the key cannot be anyone else's. Best effort: on any error
// the old lease simply runs out.
func (s *Store) revokeOwn(ctx context.Context, pfx, id string, mine clientv3.LeaseID) {
	gctx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	resp, err := s.cli.Get(gctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) != id || kv.Lease == 0 || clientv3.LeaseID(kv.Lease) == mine {
			continue
		}
		if _, err := s.cli.Revoke(gctx, clientv3.LeaseID(kv.Lease)); err == nil {
			s.log.Info("revoked this server's lease from before its restart", "key", string(kv.Key))
		}
	}
}

// attempt bounds each call Campaign makes to etcd.
const attempt = time.Second

// enqueue puts this candidate in line: its key (prefix + lease, holding
// id), created unless it already is. It returns the key and its create
// revision, the candidate's place.
func (s *Store) enqueue(ctx context.Context, sess *concurrency.Session, pfx, id string) (string, int64, error) {
	k := fmt.Sprintf("%s%x", pfx, sess.Lease())
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		resp, err := s.cli.Txn(actx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, id, clientv3.WithLease(sess.Lease()))).Else(clientv3.OpGet(k)).Commit()
		cancel()
		if err == nil {
			if resp.Succeeded {
				return k, resp.Header.Revision, nil
			}
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
				return k, kvs[0].CreateRevision, nil
			}
			continue // gone between compare and get: the lease ended; the check below says so
		}
		if err := s.retryable(ctx, sess, err); err != nil {
			return "", 0, err
		}
	}
}

// waitTurn returns once no key ahead of rev is left: this candidate leads.
// It watches the key just ahead until that is deleted, then looks again.
func (s *Store) waitTurn(ctx context.Context, sess *concurrency.Session, pfx string, rev int64) error {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	for {
		gctx, cancel := context.WithTimeout(ctx, attempt)
		resp, err := s.cli.Get(gctx, pfx, opts...)
		cancel()
		if err != nil {
			if err := s.retryable(ctx, sess, err); err != nil {
				return err
			}
			continue
		}
		if len(resp.Kvs) == 0 {
			select {
			case <-sess.Done():
				return errors.New("the election session expired")
			default:
				return nil
			}
		}
		s.waitDelete(ctx, sess, string(resp.Kvs[0].Key), resp.Header.Revision)
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-sess.Done(): // our key went with the lease: no place left to wait in
			return errors.New("the election session expired")
		default:
		}
	}
}

// waitDelete returns when key is deleted after rev, the session ends, or
// a few seconds pass (a watch can stall unseen; the caller looks again).
func (s *Store) waitDelete(ctx context.Context, sess *concurrency.Session, key string, rev int64) {
	wctx, cancel := context.WithTimeout(ctx, 5*attempt)
	defer cancel()
	wch := s.cli.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(rev))
	for {
		select {
		case <-sess.Done():
			return
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.Event_DELETE {
					return
				}
			}
		}
	}
}

// retryable says whether Campaign may try a failed call again: nil when
// etcd was only busy (a timeout, a raft election), keeping this
// candidate's place in line, the error otherwise.
func (s *Store) retryable(ctx context.Context, sess *concurrency.Session, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-sess.Done():
		return errors.New("the election session expired")
	default:
	}
	if !Unavailable(err) {
		return err
	}
	s.log.Debug("campaign interrupted; keeping our place", "err", err)
	time.Sleep(100 * time.Millisecond)
	return nil
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

// Candidates are the ids (advertised URLs) of every server campaigning
// now: the leader and its followers, the servers an agent may talk to.
func (s *Store) Candidates(ctx context.Context) ([]string, error) {
	resp, err := s.cli.Get(ctx, s.prefix+electionDir+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range resp.Kvs {
		if !slices.Contains(out, string(kv.Value)) {
			out = append(out, string(kv.Value))
		}
	}
	return out, nil
}

// CandidatesChanged signals (coalesced) each time the set of servers
// campaigning may have changed, until ctx ends. A heartbeat tells agents
// every server it may fail over to; a list cached from before the last
// server joined would leave an agent that knew one server alone with it.
// The watch restarts after an error, and signals then too: what happened
// in between is unknown.
func (s *Store) CandidatesChanged(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	signal := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			for resp := range s.cli.Watch(ctx, s.prefix+electionDir+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify()) {
				if resp.Err() != nil {
					break
				}
				if len(resp.Events) > 0 || resp.Created {
					signal() // Created: anything before the watch began is unseen
				}
			}
			signal()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return out
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
