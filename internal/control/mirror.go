package control

import (
	"slices"
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
type mirror[T any] struct {
	kind store.Kind
	id   func(*T) string
	keep func(*T) bool // nil: every entry
	rev  int64
	list []T
	read bool
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

// sync brings the copy up to the view's revision and returns it.
func (m *mirror[T]) sync(v store.View) []T {
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
	if whole {
		// First read, a journal that does not reach back, or much of the
		// table changed: copy it whole, sorted by id through (id, index)
		// pairs rather than by moving the entries themselves (a node is
		// a few hundred bytes).
		list := make([]T, 0, v.Len(m.kind))
		var ids []idAt
		v.Each(m.kind, func(_ string, e store.Entry) {
			if o := e.Obj.(T); m.keep == nil || m.keep(&o) {
				ids = append(ids, idAt{m.id(&o), len(list)})
				list = append(list, o)
			}
		})
		slices.SortFunc(ids, func(a, b idAt) int { return strings.Compare(a.id, b.id) })
		sorted := make([]T, len(list))
		for k, x := range ids {
			sorted[k] = list[x.at]
		}
		m.rev, m.list, m.read = v.Rev(), sorted, true
		return m.list
	}
	if len(changed) > 0 {
		cs := make([]entryChange[T], len(changed))
		for i, id := range changed {
			cs[i].id = id
			if e, ok := v.Get(m.kind, id); ok {
				cs[i].obj = e.Obj.(T)
				cs[i].live = m.keep == nil || m.keep(&cs[i].obj)
			}
		}
		m.list = patch(m.list, cs, m.id)
	}
	m.rev = v.Rev()
	return m.list
}

// patch applies changes (sorted by id) to list (sorted by id), in place:
// replaced entries in their slot, gone ones removed, new ones merged in
// from the end (ids grow with time, so new ones land near the end and
// the merge moves only the tail).
func patch[T any](list []T, cs []entryChange[T], id func(*T) string) []T {
	byID := func(o T, want string) int { return strings.Compare(id(&o), want) }
	gone := map[string]bool{}
	var added []T
	for _, c := range cs {
		i, found := slices.BinarySearchFunc(list, c.id, byID)
		switch {
		case found && c.live:
			list[i] = c.obj
		case found:
			gone[c.id] = true
		case c.live:
			added = append(added, c.obj) // in id order, as cs is
		}
	}
	if len(gone) > 0 {
		list = slices.DeleteFunc(list, func(o T) bool { return gone[id(&o)] })
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
