package store

// journal is the recent changes to one table, in revision order: a reader
// that copied the table at some revision catches up on what changed since
// instead of copying it all again (the control loop's read of 100k live
// jobs took the cache's lock, and every submit waiting on it, for tens of
// milliseconds each pass).
type journal struct {
	// from is the revision the journal starts after: every change with a
	// later revision is in it.
	from int64
	revs []int64
	ids  []string
}

// journalMax bounds a journal; past it the older half is dropped, and a
// reader that far behind reads the table whole.
const journalMax = 1 << 16

func (j *journal) record(rev int64, id string) {
	if len(j.revs) >= journalMax {
		half := len(j.revs) / 2
		j.from = j.revs[half-1]
		j.revs = append(j.revs[:0], j.revs[half:]...)
		j.ids = append(j.ids[:0], j.ids[half:]...)
	}
	j.revs = append(j.revs, rev)
	j.ids = append(j.ids, id)
}

// since calls fn for each id changed after rev. False when the journal
// does not reach back that far.
func (j *journal) since(rev int64, fn func(id string)) bool {
	if j == nil || rev < j.from {
		return false
	}
	// Revisions only grow: find the first change after rev.
	lo, hi := 0, len(j.revs)
	for lo < hi {
		m := (lo + hi) / 2
		if j.revs[m] <= rev {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for _, id := range j.ids[lo:] {
		fn(id)
	}
	return true
}

// ChangedSince calls fn with the id of every entry of table k put or
// deleted after revision rev (an id may come more than once), and
// reports whether it could: false when the cache no longer keeps the
// changes that far back (or reloaded since), and the caller must read
// the table whole.
func (v View) ChangedSince(k Kind, rev int64, fn func(id string)) bool {
	return v.c.journals[k].since(rev, fn)
}
