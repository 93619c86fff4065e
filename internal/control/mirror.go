package control

import (
	"slices"
	"sort"
	"strings"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/store"
)

// mirror is the loop's copy of one table (the unfinished jobs, every
// allocation, every node), sorted by id, and the cache revision it
// reflects. Each pass catches up on the entries that changed since (the
// cache's journal) rather than copying the whole table under the cache's
// lock: at 100k pending jobs and 47k allocations that copy and its sort
// held every submit waiting for its write to show for tens of
// milliseconds, and made tens of MB of garbage a pass. Only the loop
// touches it; the core never modifies what it is given.
//
// Catching up is two steps: collect, under the cache's read lock, takes
// the changed entries (or the whole table, unsorted); apply, after the
// lock is released, patches or sorts. The watch cannot apply a write
// while a reader holds the lock, and every submit and heartbeat waiting
// for its own write waits with it: with 100k allocations, cutting out
// the ones that ended took 20-100 ms a pass, all of it theirs to wait.
type mirror[T any] struct {
	kind store.Kind
	id   func(*T) string
	keep func(*T) bool // nil: every entry
	rev  int64
	list []T
	read bool
	// What collect took, for apply: the revision, and the changes or a
	// whole unsorted copy. rev and read move only with the list.
	next    int64
	changes []entryChange[T]
	whole   []T
	wholeAt []idAt
}

func newMirror[T any](kind store.Kind, id func(*T) string, keep func(*T) bool) mirror[T] {
	return mirror[T]{kind: kind, id: id, keep: keep}
}

// idAt is an entry's id and its place in an unsorted copy.
type idAt struct {
	id string
	at int
}

// entryChange is one entry as the cache holds it now; live is false when it is
// gone (or no longer kept).
type entryChange[T any] struct {
	id   string
	obj  T
	live bool
}

// sync brings the copy up to the view's revision and returns it: collect
// and apply in one, for a caller that holds the view anyway.
func (m *mirror[T]) sync(v store.View) []T {
	m.collect(v)
	return m.apply()
}

// collect takes from the view, under the cache's lock, what apply needs
// to bring the copy to the view's revision.
func (m *mirror[T]) collect(v store.View) {
	var changed []string
	whole := !m.read || !v.ChangedSince(m.kind, m.rev, func(id string) { changed = append(changed, id) })
	if !whole && len(changed) > 0 {
		// An id comes once per write: 12,500 nodes heartbeating write
		// the same few nodes over and over, and counted with repeats
		// they sent every long pass to the whole copy below.
		slices.Sort(changed)
		changed = slices.Compact(changed)
		whole = len(changed) > v.Len(m.kind)/4
	}
	m.next = v.Rev()
	if whole {
		// First read, a journal that does not reach back, or much of the
		// table changed: copy it whole; apply sorts it by id through
		// (id, index) pairs rather than by moving the entries themselves
		// (a node is a few hundred bytes).
		m.whole = make([]T, 0, v.Len(m.kind))
		m.wholeAt = make([]idAt, 0, v.Len(m.kind))
		v.Each(m.kind, func(_ string, e store.Entry) {
			if o := e.Obj.(T); m.keep == nil || m.keep(&o) {
				m.wholeAt = append(m.wholeAt, idAt{m.id(&o), len(m.whole)})
				m.whole = append(m.whole, o)
			}
		})
		m.changes = nil
		return
	}
	m.whole, m.wholeAt = nil, nil // a collect replaces what the last one took
	m.changes = m.changes[:0]
	for _, id := range changed {
		c := entryChange[T]{id: id}
		if e, ok := v.Get(m.kind, id); ok {
			c.obj = e.Obj.(T)
			c.live = m.keep == nil || m.keep(&c.obj)
		}
		m.changes = append(m.changes, c)
	}
}

// apply brings the copy to what the last collect took and returns it.
func (m *mirror[T]) apply() []T {
	m.rev, m.read = m.next, true
	if m.whole != nil {
		slices.SortFunc(m.wholeAt, func(a, b idAt) int { return strings.Compare(a.id, b.id) })
		sorted := make([]T, len(m.whole))
		for k, x := range m.wholeAt {
			sorted[k] = m.whole[x.at]
		}
		m.list, m.whole, m.wholeAt = sorted, nil, nil
		return m.list
	}
	if len(m.changes) > 0 {
		m.list = patch(m.list, m.changes, m.id)
		clear(m.changes) // hold no entry past its pass
	}
	return m.list
}

// patch applies changes (sorted by id) to list (sorted by id), in place:
// replaced entries in their slot, gone ones removed, new ones merged in
// from the end (ids grow with time, so new ones land near the end and
// the merge moves only the tail).
//
// Gone entries are cut out by the places the search found, one copy per
// run between them: a predicate over the whole list, hashing every id
// and copying each allocation onto the heap, took 20 ms for one ended
// allocation among 100k (BenchmarkPatchRemoves; 1.8 ms now).
func patch[T any](list []T, cs []entryChange[T], id func(*T) string) []T {
	var gone []int // ascending: cs and list are both in id order
	var added []T
	for _, c := range cs {
		i := sort.Search(len(list), func(i int) bool { return id(&list[i]) >= c.id })
		found := i < len(list) && id(&list[i]) == c.id
		switch {
		case found && c.live:
			list[i] = c.obj
		case found:
			gone = append(gone, i)
		case c.live:
			added = append(added, c.obj) // in id order, as cs is
		}
	}
	if len(gone) > 0 {
		w := gone[0]
		for k, g := range gone {
			end := len(list)
			if k+1 < len(gone) {
				end = gone[k+1]
			}
			w += copy(list[w:], list[g+1:end])
		}
		clear(list[w:]) // drop what the tail still points to
		list = list[:w]
	}
	if len(added) == 0 {
		return list
	}
	i, k := len(list)-1, len(added)-1
	list = append(list, added...)
	for w := len(list) - 1; k >= 0; w-- {
		if i >= 0 && id(&list[i]) > id(&added[k]) {
			list[w] = list[i]
			i--
		} else {
			list[w] = added[k]
			k--
		}
	}
	return list
}

func jobID(j **model.Job) string         { return (*j).ID }
func allocID(a *model.Allocation) string { return a.ID }
func nodeID(n *model.Node) string        { return n.ID }
func unfinished(j **model.Job) bool      { return !(*j).State.Terminal() }
