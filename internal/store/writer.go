package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrFenced means the writer no longer holds the election: etcd refused
// the transaction and nothing of it was applied.
var ErrFenced = errors.New("store: not the leader (fenced out): write refused")

// ErrConflict means a condition of the transaction failed (a key it
// depends on changed, or a key it creates exists): nothing was applied.
var ErrConflict = errors.New("store: conflict: the table changed under the write")

// Writer applies transactions under one fence.
type Writer struct {
	s        *Store
	fenceKey string
	fence    int64
}

// NewWriter builds a writer for a fence the caller claims to hold. Only
// tests use it directly: it is how a stale leader is simulated.
func (s *Store) NewWriter(fenceKey string, fence int64) *Writer {
	return &Writer{s: s, fenceKey: fenceKey, fence: fence}
}

// Fence is the writer's fence.
func (w *Writer) Fence() int64 { return w.fence }

// FenceKey is the election key the fence is the create revision of.
func (w *Writer) FenceKey() string { return w.fenceKey }

// Txn is a set of writes applied together or not at all.
type Txn struct {
	s     *Store
	conds []clientv3.Cmp
	ops   []clientv3.Op
	err   error
	// unchanged finds a key's Unchanged condition in conds: a pass
	// binding a thousand 1-GPU jobs named each node once per job bound
	// there, and each job twice, three times the conditions (and the
	// request etcd logs) that it needed.
	unchanged map[string]unchangedCond
}

type unchangedCond struct {
	at  int // the ModRevision compare's place in conds
	rev int64
}

// Txn starts a transaction.
func (w *Writer) Txn() *Txn { return &Txn{s: w.s} }

// Len is the number of writes in the transaction.
func (t *Txn) Len() int { return len(t.ops) }

// Put writes v as JSON.
func (t *Txn) Put(k Kind, id string, v any) *Txn {
	b, err := json.Marshal(v)
	if err != nil {
		t.err = errors.Join(t.err, fmt.Errorf("encoding %s/%s: %w", k, id, err))
		return t
	}
	t.ops = append(t.ops, clientv3.OpPut(t.s.key(k, id), string(b)))
	return t
}

// Create writes v only if the key does not exist.
func (t *Txn) Create(k Kind, id string, v any) *Txn {
	return t.Absent(k, id).Put(k, id, v)
}

// Delete removes a key.
func (t *Txn) Delete(k Kind, id string) *Txn {
	t.ops = append(t.ops, clientv3.OpDelete(t.s.key(k, id)))
	return t
}

// Unchanged makes the transaction conditional on the key, present when
// the caller read it at revision rev, being still present and not modified
// after rev. etcd compares an absent key's revisions as 0, so the
// modification check alone passes for a key deleted since the read: a
// pass that had read a deployment bound a replica for it after it was
// deleted, and that replica held a node's GPUs with no owner to stop it.
// Presence is therefore checked too (a deleted key's version is 0).
// A key named twice keeps one condition, the stricter: not modified
// after the older of the two revisions.
func (t *Txn) Unchanged(k Kind, id string, rev int64) *Txn {
	key := t.s.key(k, id)
	if c, ok := t.unchanged[key]; ok {
		if rev < c.rev {
			t.conds[c.at] = clientv3.Compare(clientv3.ModRevision(key), "<", rev+1)
			t.unchanged[key] = unchangedCond{c.at, rev}
		}
		return t
	}
	if t.unchanged == nil {
		t.unchanged = map[string]unchangedCond{}
	}
	t.unchanged[key] = unchangedCond{len(t.conds), rev}
	t.conds = append(t.conds, clientv3.Compare(clientv3.ModRevision(key), "<", rev+1),
		clientv3.Compare(clientv3.Version(key), ">", 0))
	return t
}

// Absent makes the transaction conditional on the key not existing: a
// create that must not overwrite one made meanwhile.
func (t *Txn) Absent(k Kind, id string) *Txn {
	t.conds = append(t.conds, clientv3.Compare(clientv3.Version(t.s.key(k, id)), "=", 0))
	return t
}

// Commit applies the transaction if the fence still holds and every
// condition is met, then waits until the cache reflects it. It returns
// the revision written at.
func (w *Writer) Commit(ctx context.Context, t *Txn) (int64, error) {
	if t.err != nil {
		return 0, t.err
	}
	if len(t.ops) == 0 {
		return w.s.cache.Rev(), nil
	}
	fence := clientv3.Compare(clientv3.CreateRevision(w.fenceKey), "=", w.fence)
	conds := append([]clientv3.Cmp{fence}, t.conds...)
	resp, err := w.s.cli.Txn(ctx).If(conds...).Then(t.ops...).
		Else(clientv3.OpTxn([]clientv3.Cmp{fence}, nil, nil)).Commit()
	if err != nil {
		return 0, fmt.Errorf("store: write: %w", err)
	}
	if !resp.Succeeded {
		// The Else branch re-checks the fence alone, telling a lost
		// election from a failed condition.
		if len(resp.Responses) == 1 {
			if inner := resp.Responses[0].GetResponseTxn(); inner != nil && inner.Succeeded {
				return 0, ErrConflict
			}
		}
		return 0, ErrFenced
	}
	rev := resp.Header.Revision
	if w.s.log.Enabled(ctx, slog.LevelDebug) {
		for _, op := range t.ops {
			w.s.log.Debug("table write", "rev", rev, "delete", op.IsDelete(), "key", string(op.KeyBytes()))
		}
	}
	return rev, w.s.cache.WaitRev(ctx, rev)
}
