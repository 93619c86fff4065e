package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthsched/berth/internal/model"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Entry is one key of the table as of the cache's revision.
type Entry struct {
	ModRev    int64
	CreateRev int64
	// Obj is the decoded value for the model kinds (model.Node, *model.Job,
	// model.Deployment, model.Allocation, model.Quota, model.UsageRecord,
	// model.Sample), and the stored JSON, a []byte, for the kinds the
	// cache does not decode (alerts, tokens, idempotency keys, docs): at a
	// million jobs the JSON beside the decoded job was most of a gigabyte,
	// and a field for it, empty for every job, was 24 of the 72 bytes an
	// entry takes in its table. Raw gives either as JSON. A job is a
	// pointer shared with the control loop: never modify it.
	Obj any
}

// Raw is the entry as JSON: its stored value, or its object encoded
// again (which reads back as the same object). A stored value is the
// cache's own: read it, never modify it.
func (e Entry) Raw() []byte {
	switch o := e.Obj.(type) {
	case nil:
		return nil
	case []byte:
		return o
	}
	b, _ := json.Marshal(e.Obj)
	return b
}

// Cache is the table as of one etcd revision, kept current by a watch.
// Readers hold it only for the duration of a Read.
type Cache struct {
	mu     sync.RWMutex
	rev    int64
	tables map[Kind]map[string]Entry
	// Allocations indexed by node and by owner: heartbeats and job views
	// read these thousands of times a second.
	byNode  map[string]map[string]struct{}
	byOwner map[string]map[string]struct{}
	// usageOf finds a job's (or replica's) usage record by its id: a
	// compacted job is read from it.
	usageOf map[string]string
	// Jobs ordered by submit time and, pending ones, by queue order.
	jobs    *jobIndex
	kindRev map[Kind]int64
	// journals are each table's recent changes (see ChangedSince).
	journals map[Kind]*journal
	subs     map[chan struct{}]bool
	// revCh is closed and replaced whenever rev advances.
	revCh chan struct{}
	// want is the highest revision a WaitRev has waited for: a revision
	// etcd has committed, so a watch that stays below it is stalled.
	want atomic.Int64
}

func newCache() *Cache {
	c := &Cache{tables: map[Kind]map[string]Entry{}, byNode: map[string]map[string]struct{}{},
		byOwner: map[string]map[string]struct{}{}, usageOf: map[string]string{}, jobs: newJobIndex(), kindRev: map[Kind]int64{}, subs: map[chan struct{}]bool{}, revCh: make(chan struct{})}
	c.resetJournals(0)
	for _, k := range kinds {
		c.tables[k] = map[string]Entry{}
	}
	return c
}

// View reads the cache under its lock; see Cache.Read.
type View struct{ c *Cache }

// Read calls fn with a consistent view of the table. fn must not keep the
// view or block.
func (c *Cache) Read(fn func(View)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fn(View{c})
}

// Rev is the etcd revision the view reflects.
func (v View) Rev() int64 { return v.c.rev }

// Get returns one entry.
func (v View) Get(k Kind, id string) (Entry, bool) {
	e, ok := v.c.tables[k][id]
	return e, ok
}

// KindRev is the last revision at which a table changed.
func (v View) KindRev(k Kind) int64 { return v.c.kindRev[k] }

// Len counts a table's entries.
func (v View) Len(k Kind) int { return len(v.c.tables[k]) }

// Each calls fn for every entry of a table, in no particular order.
func (v View) Each(k Kind, fn func(id string, e Entry)) {
	for id, e := range v.c.tables[k] {
		fn(id, e)
	}
}

// AllocationsOn lists the allocations on one node.
func (v View) AllocationsOn(node string) []model.Allocation {
	return v.allocs(v.c.byNode[node])
}

// AllocationIDsOn lists the ids of the allocations on one node, sorted:
// for a caller that needs few of their fields, without copying every
// allocation out of the table (a heartbeat reads them 2,500 times a
// second on a large fleet).
func (v View) AllocationIDsOn(node string) []string {
	ids := make([]string, 0, len(v.c.byNode[node]))
	for id := range v.c.byNode[node] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// IsOn reports whether allocation id is on node.
func (v View) IsOn(node, id string) bool {
	_, ok := v.c.byNode[node][id]
	return ok
}

// AllocationsOf lists the allocations of one owner (job or deployment).
func (v View) AllocationsOf(owner string) []model.Allocation {
	return v.allocs(v.c.byOwner[owner])
}

func (v View) allocs(ids map[string]struct{}) []model.Allocation {
	out := make([]model.Allocation, 0, len(ids))
	for id := range ids {
		out = append(out, v.c.tables[Allocations][id].Obj.(model.Allocation))
	}
	slices.SortFunc(out, func(a, b model.Allocation) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// UsageOf is the usage record of a finished job (or a gone replica's
// allocation) by its id.
func (v View) UsageOf(id string) (model.UsageRecord, bool) {
	e, ok := v.c.tables[Usage][v.c.usageOf[id]]
	if !ok {
		return model.UsageRecord{}, false
	}
	r, ok := e.Obj.(model.UsageRecord)
	return r, ok
}

// Rev is the revision the cache reflects.
func (c *Cache) Rev() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// WaitRev blocks until the cache reflects revision rev, so that a writer
// reads its own write.
func (c *Cache) WaitRev(ctx context.Context, rev int64) error {
	for {
		c.mu.RLock()
		cur, ch := c.rev, c.revCh
		c.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		for w := c.want.Load(); w < rev && !c.want.CompareAndSwap(w, rev); w = c.want.Load() {
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the table to reach revision %d (at %d): %w", rev, cur, ctx.Err())
		}
	}
}

// Subscribe returns a channel that receives (coalesced) whenever the table
// changes, and a function to stop.
func (c *Cache) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs[ch] = true
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.subs, ch)
		c.mu.Unlock()
	}
}

// Get is a typed read of one model object.
func Get[T any](c *Cache, k Kind, id string) (T, bool) {
	var out T
	var ok bool
	c.Read(func(v View) {
		var e Entry
		if e, ok = v.Get(k, id); ok {
			switch o := e.Obj.(type) {
			case T:
				out = o
			case *T: // jobs
				out = *o
			default:
				ok = false
			}
		}
	})
	return out, ok
}

// decode turns a value into the model object its kind holds.
func decode(k Kind, b []byte) (any, error) {
	switch k {
	case Nodes:
		return decodeAs[model.Node](b)
	case Jobs:
		// Jobs are kept by pointer: the control loop's copy of the live
		// jobs shares them instead of holding a second copy of each (at a
		// million jobs, hundreds of MB). Nothing modifies a cached job;
		// an update replaces the pointer.
		var j model.Job
		if err := json.Unmarshal(b, &j); err != nil {
			return nil, err
		}
		internJob(&j)
		return &j, nil
	case Deployments:
		return decodeAs[model.Deployment](b)
	case Allocations:
		return decodeAs[model.Allocation](b)
	case Quotas:
		return decodeAs[model.Quota](b)
	case Usage:
		return decodeAs[model.UsageRecord](b)
	case History:
		return decodeAs[model.Sample](b)
	}
	return nil, nil
}

func decodeAs[T any](b []byte) (any, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// loadPage is how many keys one read of the load takes. The table is
// read in pages at one revision: in one read, a million jobs are a
// 400 MB answer, over the client's receive limit, and a server could not
// restart or take over at that size.
var loadPage int64 = 10000

// load reads the whole table and returns the revision it was read at.
// Each read is bounded by perRead, not the whole load: a large table
// takes as long as it takes, a silent etcd does not.
func (s *Store) load(ctx context.Context, perRead time.Duration) (int64, error) {
	c := newCache()
	end := clientv3.GetPrefixRangeEnd(s.prefix)
	get := func(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
		rctx, cancel := context.WithTimeout(ctx, perRead)
		defer cancel()
		return s.cli.Get(rctx, key, append(opts, clientv3.WithRange(end), clientv3.WithLimit(loadPage))...)
	}
	resp, err := get(s.prefix)
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	for {
		for _, kv := range resp.Kvs {
			c.put(s, kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		next := string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		resp, err = get(next, clientv3.WithRev(rev))
		if err != nil {
			return 0, err // compacted meanwhile, among others: the caller loads again
		}
	}
	resp.Header.Revision = rev
	s.cache.mu.Lock()
	s.cache.tables, s.cache.byNode, s.cache.byOwner, s.cache.usageOf, s.cache.jobs = c.tables, c.byNode, c.byOwner, c.usageOf, c.jobs
	for k := range s.cache.kindRev {
		// A reload may have missed deletes: treat every table as changed.
		s.cache.kindRev[k] = resp.Header.Revision
	}
	for k, r := range c.kindRev {
		s.cache.kindRev[k] = max(s.cache.kindRev[k], r)
	}
	// What changed before the reload is not known one by one.
	s.cache.resetJournals(resp.Header.Revision)
	s.cache.advance(resp.Header.Revision)
	s.cache.mu.Unlock()
	return resp.Header.Revision, nil
}

func (c *Cache) resetJournals(rev int64) {
	c.journals = make(map[Kind]*journal, len(kinds))
	for _, k := range kinds {
		c.journals[k] = &journal{from: rev}
	}
}

func (c *Cache) put(s *Store, kv *mvccpb.KeyValue) {
	if d, ok := s.decoded(kv); ok {
		c.putDecoded(d)
	}
}

// decodedKV is a written key decoded, ready for the cache.
type decodedKV struct {
	kind Kind
	id   string
	kv   *mvccpb.KeyValue
	obj  any
}

// decoded splits and decodes a written key; false for a key outside the
// table or a value that does not decode (logged). It touches nothing
// shared: the watch decodes a response's events before it takes the
// cache's lock, which every reader waits on. (Decoded under it, a pass's
// thousands of writes held every submit and heartbeat behind them.)
func (s *Store) decoded(kv *mvccpb.KeyValue) (decodedKV, bool) {
	k, id, ok := s.split(string(kv.Key))
	if !ok {
		return decodedKV{}, false
	}
	obj, err := decode(k, kv.Value)
	if err != nil {
		s.log.Error("table: undecodable value left out of the cache", "key", string(kv.Key), "err", err)
		return decodedKV{}, false
	}
	if j, ok := obj.(*model.Job); ok && j.ID == id {
		// The job's own id, not a slice of the key: the key string
		// (prefix, table and id) is then garbage, not kept per job.
		id = j.ID
	}
	return decodedKV{kind: k, id: id, kv: kv, obj: obj}, true
}

// putDecoded puts a decoded key in the cache; the caller holds the lock
// (or owns the cache, as a load does).
func (c *Cache) putDecoded(d decodedKV) {
	k, id, kv, obj := d.kind, d.id, d.kv, d.obj
	c.remove(k, id)
	c.kindRev[k] = max(c.kindRev[k], kv.ModRevision)
	c.journals[k].record(kv.ModRevision, id)
	e := Entry{ModRev: kv.ModRevision, CreateRev: kv.CreateRevision, Obj: obj}
	if obj == nil {
		e.Obj = kv.Value
	}
	c.tables[k][id] = e
	switch o := obj.(type) {
	case model.Allocation:
		link(c.byNode, o.NodeID, id)
		link(c.byOwner, o.OwnerID, id)
	case *model.Job:
		c.jobs.add(o)
	case model.UsageRecord:
		c.usageOf[o.ID] = id
	}
}

// remove deletes an entry and its index links.
func (c *Cache) remove(k Kind, id string) {
	if old, ok := c.tables[k][id]; ok {
		switch o := old.Obj.(type) {
		case model.Allocation:
			unlink(c.byNode, o.NodeID, id)
			unlink(c.byOwner, o.OwnerID, id)
		case *model.Job:
			c.jobs.drop(o)
		case model.UsageRecord:
			if c.usageOf[o.ID] == id {
				delete(c.usageOf, o.ID)
			}
		}
		delete(c.tables[k], id)
	}
}

func link(ix map[string]map[string]struct{}, key, id string) {
	m := ix[key]
	if m == nil {
		m = map[string]struct{}{}
		ix[key] = m
	}
	m[id] = struct{}{}
}

func unlink(ix map[string]map[string]struct{}, key, id string) {
	if m := ix[key]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(ix, key)
		}
	}
}

// advance moves to a later revision; the caller holds the write lock.
func (c *Cache) advance(rev int64) {
	if rev <= c.rev {
		return
	}
	c.rev = rev
	close(c.revCh)
	c.revCh = make(chan struct{})
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch applies every change after rev until ctx ends, reloading the table
// if etcd compacted past the revision it needs or the watch stalls.
func (s *Store) watch(ctx context.Context, rev int64) {
	defer close(s.done)
	for ctx.Err() == nil {
		wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
		stalled := make(chan struct{})
		go s.watchdog(wctx, stop, stalled)
		for resp := range s.cli.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify()) {
			if resp.CompactRevision != 0 {
				s.log.Warn("table watch compacted; reloading", "compact_revision", resp.CompactRevision)
				break
			}
			if err := resp.Err(); err != nil {
				select {
				case <-stalled: // the watchdog said why
				default:
					s.log.Warn("table watch", "err", err)
				}
				break
			}
			if watchDrop != nil && watchDrop() {
				continue
			}
			puts := make([]decodedKV, len(resp.Events))
			for i, ev := range resp.Events {
				if ev.Type != mvccpb.DELETE {
					puts[i], _ = s.decoded(ev.Kv)
				}
			}
			s.cache.mu.Lock()
			for i, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					if k, id, ok := s.split(string(ev.Kv.Key)); ok {
						s.cache.remove(k, id)
						s.cache.kindRev[k] = max(s.cache.kindRev[k], ev.Kv.ModRevision)
						s.cache.journals[k].record(ev.Kv.ModRevision, id)
					}
					continue
				}
				if puts[i].kv != nil {
					s.cache.putDecoded(puts[i])
				}
			}
			s.cache.advance(resp.Header.Revision)
			rev = s.cache.rev
			s.cache.mu.Unlock()
		}
		stop()
		if ctx.Err() != nil {
			return
		}
		// The watch ended: reload so nothing between is missed.
		for ctx.Err() == nil {
			r, err := s.load(ctx, 5*time.Second)
			if err == nil {
				rev = r
				break
			}
			s.log.Warn("table reload", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// watchDrop, set by tests, makes the watch drop responses while it
// returns true: a stream that stays open and delivers nothing.
var watchDrop func() bool

// stallAfter is how long the cache may stay below a revision etcd has
// committed (one a writer or a consistent read waits for) before the
// watch is taken for stalled and restarted. A stream can stay open and
// deliver nothing (around a raft leadership move, among others); every
// write of the leader waits for its own revision, so such a stall froze
// the leader, silent, until the process was restarted.
var stallAfter = 5 * time.Second

// watchdog ends the watch (stop) once the cache has stayed below a
// revision etcd committed for stallAfter, asking etcd for a progress
// notification halfway: a watch that is merely idle answers one.
func (s *Store) watchdog(ctx context.Context, stop func(), stalled chan<- struct{}) {
	const every = 250 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	var since time.Time
	last := int64(-1)
	asked := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			rev, want := s.cache.Rev(), s.cache.want.Load()
			switch {
			case want <= rev:
				since, asked = time.Time{}, false
			case rev != last || since.IsZero():
				since, asked = now, false
			case now.Sub(since) >= stallAfter:
				s.log.Warn("table watch stalled; restarting it", "at_revision", rev, "committed", want, "for", now.Sub(since).Round(time.Millisecond))
				close(stalled)
				stop()
				return
			case !asked && now.Sub(since) >= stallAfter/2:
				asked = true
				_ = s.cli.RequestProgress(ctx)
			}
			last = rev
		}
	}
}
