package control

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// One pass stamps every allocation it writes with one clock reading, so
// the random part alone keeps a pass's ids apart: 64 bits of it.
func TestAllocationIDsOfOneInstantCarry64RandomBits(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	form := regexp.MustCompile(`^a-` + strconv.FormatInt(now.UnixMilli(), 36) + `[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 20000 {
		id := newID("a", now)
		if !form.MatchString(id) {
			t.Fatalf("allocation id %q: want a-, the milliseconds in base 36 and 16 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("allocation id %q made twice", id)
		}
		seen[id] = true
	}
}
