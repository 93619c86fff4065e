package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// table reads a CSV file with a header row and hands out fields by column
// name, with errors that say file:line and the field.
type table struct {
	path   string
	cols   map[string]int
	rows   [][]string
	line   []int // file line of each row
	errRow int
}

// readTable reads path and checks that its header names every required
// column. A required entry may list alternatives separated by "|"
// ("cpu_milli|cpu"): any one of them will do, and the error names the
// first.
func readTable(path string, required ...string) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: cannot read the header row: %v", path, err)
	}
	t := &table{path: path, cols: map[string]int{}}
	for i, h := range header {
		t.cols[strings.TrimSpace(h)] = i
	}
	for _, c := range required {
		alts := strings.Split(c, "|")
		if !slices.ContainsFunc(alts, t.has) {
			names := make([]string, len(required))
			for i, r := range required {
				if first, rest, ok := strings.Cut(r, "|"); ok {
					r = first + " (or " + strings.ReplaceAll(rest, "|", " or ") + ")"
				}
				names[i] = r
			}
			return nil, fmt.Errorf("%s:1: missing column %q; the header must name %s", path, alts[0], strings.Join(names, ", "))
		}
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A parse error carries its own line; FieldPos is only
			// defined for a record that was read.
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%s:%d: %d fields, the header has %d", path, line, len(rec), len(header))
		}
		t.rows = append(t.rows, rec)
		t.line = append(t.line, line)
	}
	return t, nil
}

// has reports whether the header names col.
func (t *table) has(col string) bool {
	_, ok := t.cols[col]
	return ok
}

// get returns row i's field, "" when the column is absent.
func (t *table) get(i int, col string) string {
	c, ok := t.cols[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.rows[i][c])
}

func (t *table) fail(i int, col, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s: %s", t.path, t.line[i], col, fmt.Sprintf(format, args...))
}

func (t *table) int(i int, col string, def int64) (int64, error) {
	s := t.get(i, col)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, t.fail(i, col, "%q is not a whole number", s)
	}
	return n, nil
}

// row reads several fields of one row and keeps the first error, so that
// a loader reads a record in a few lines and checks once.
type row struct {
	t   *table
	i   int
	err error
}

func (t *table) row(i int) *row { return &row{t: t, i: i} }

func (r *row) int(col string, def int64) int64 {
	if r.err != nil {
		return 0
	}
	v, err := r.t.int(r.i, col, def)
	r.err = err
	return v
}

func (r *row) duration(col string) time.Duration {
	if r.err != nil {
		return 0
	}
	v, err := r.t.duration(r.i, col)
	r.err = err
	return v
}

// duration accepts Go durations ("90m", "1h30m") or plain seconds.
func (t *table) duration(i int, col string) (time.Duration, error) {
	s := t.get(i, col)
	if s == "" {
		return 0, nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, t.fail(i, col, "%q is neither seconds nor a duration like 90m", s)
	}
	return d, nil
}
