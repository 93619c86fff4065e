package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/berthsched/berth/internal/model"
)

// TestTablesEscapeWhatTheyMeet: a name written before names were checked
// (ESC, CR/LF, a right-to-left override) prints escaped: one row per
// object, nothing a terminal would act on.
func TestTablesEscapeWhatTheyMeet(t *testing.T) {
	var buf bytes.Buffer
	out := outFlag{format: "table"}
	names := []string{"ok", "\x1b[2Jclear", "a\r\nj-forged  running", "abc\u202egnp.exe", "nul\x00"}
	err := out.print(&buf, nil, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "ID\tNAME")
		for i, n := range names {
			fmt.Fprintf(tw, "j-%d\t%s\n", i, dash(n))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	if lines := strings.Count(s, "\n"); lines != len(names)+1 {
		t.Errorf("%d lines for %d rows and a header:\n%s", lines, len(names), s)
	}
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\x00"} {
		if strings.Contains(s, bad) {
			t.Errorf("table holds %q raw:\n%q", bad, s)
		}
	}
	for _, want := range []string{`\x1b[2Jclear`, `a\x0d\x0aj-forged`, `abc\u202egnp.exe`, `nul\x00`} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %s:\n%s", want, s)
		}
	}
}

// TestPlacedOnSortsAndJoinsRanges: a gang's allocations print in node
// order, consecutive nodes with the same GPUs as one range.
func TestPlacedOnSortsAndJoinsRanges(t *testing.T) {
	var as []model.Allocation
	for _, n := range []string{"n011", "n009", "n008", "n010", "n013"} {
		as = append(as, model.Allocation{NodeID: n, GPUs: 0xff})
	}
	as = append(as, model.Allocation{NodeID: "n014", GPUs: 0x0f})
	if got, want := placedOn(as), "n008-n011[0-7],n013[0-7],n014[0-3]"; got != want {
		t.Errorf("placedOn = %q, want %q", got, want)
	}
	// Natural order; a change of digit count is not a range.
	if got := placedOn([]model.Allocation{{NodeID: "gpu-10", GPUs: 1}, {NodeID: "gpu-9", GPUs: 1}}); got != "gpu-9[0],gpu-10[0]" {
		t.Errorf("placedOn across a digit count = %q", got)
	}
}
