package store

import (
	"slices"
	"testing"
)

// TestJournal: a reader gets every change after its revision while the
// journal reaches back, and is told to read the table whole once it does
// not (trimmed past, or reset by a reload).
func TestJournal(t *testing.T) {
	j := &journal{from: 10}
	for r := int64(11); r <= 20; r++ {
		j.record(r, string(rune('a'+r-11)))
	}
	var got []string
	if !j.since(15, func(id string) { got = append(got, id) }) || !slices.Equal(got, []string{"f", "g", "h", "i", "j"}) {
		t.Fatalf("changes after 15: %v", got)
	}
	if !j.since(20, func(string) { t.Fatal("nothing is after the newest change") }) {
		t.Fatal("a reader at the newest revision is caught up")
	}
	if j.since(9, func(string) {}) {
		t.Fatal("the journal starts after 10: a reader at 9 may have missed a change")
	}
	for r := int64(21); r < 21+journalMax; r++ {
		j.record(r, "x")
	}
	if len(j.revs) > journalMax || j.since(15, func(string) {}) {
		t.Fatalf("after trimming (%d kept, from %d) a reader at 15 must read whole", len(j.revs), j.from)
	}
	n := 0
	if !j.since(j.from, func(string) { n++ }) || n != len(j.revs) {
		t.Fatalf("a reader at the journal's start gets all %d kept changes, got %d", len(j.revs), n)
	}
}
