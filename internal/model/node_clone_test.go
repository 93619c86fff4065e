package model

import (
	"reflect"
	"testing"
	"time"
)

// TestNodeCloneSharesNothing changes every part of a clone a field of
// Node reaches by reference and requires the original untouched, and
// fails on any reference field it does not know: a field added to Node
// must be added to Clone and here, or the heartbeat's copy of a node
// would write into the table's cache.
func TestNodeCloneSharesNothing(t *testing.T) {
	known := map[string]bool{"IdentityChange": true, "Links": true, "MIG": true, "MIGProfiles": true}
	typ := reflect.TypeFor[Node]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
			if !known[f.Name] {
				t.Errorf("Node.%s is a %s: make Clone copy it, then add it to this test", f.Name, f.Type.Kind())
			}
		}
	}
	orig := Node{ID: "n1", Pod: "p1", GPUs: 2,
		IdentityChange: &IdentityChange{Reason: "node_rebooted", At: time.Unix(1, 0).UTC(), Invalidated: 3},
		Links:          &LinkMatrix{Links: [][]int{{0, 18}, {18, 0}}},
		MIG:            [][]int{{1, 2}, {}},
		MIGProfiles:    [][]string{{"1g.10gb", "2g.20gb"}, {}},
	}
	keep := Node{ID: "n1", Pod: "p1", GPUs: 2,
		IdentityChange: &IdentityChange{Reason: "node_rebooted", At: time.Unix(1, 0).UTC(), Invalidated: 3},
		Links:          &LinkMatrix{Links: [][]int{{0, 18}, {18, 0}}},
		MIG:            [][]int{{1, 2}, {}},
		MIGProfiles:    [][]string{{"1g.10gb", "2g.20gb"}, {}},
	}
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("clone differs from the original:\n%+v\n%+v", c, orig)
	}
	c.IdentityChange.Reason = "changed"
	c.Links.Links[0][1] = 99
	c.MIG[0][0] = 7
	c.MIGProfiles[0][0] = "7g.80gb"
	if !reflect.DeepEqual(orig, keep) {
		t.Errorf("changing the clone changed the original: %+v", orig)
	}
	if empty := (Node{}).Clone(); !reflect.DeepEqual(empty, Node{}) {
		t.Errorf("clone of an empty node: %+v", empty)
	}
}
