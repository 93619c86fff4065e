package agent

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readOrEmpty(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func openTestLog(t *testing.T, max int64) (*cappedLog, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stdout.log")
	l, err := openCappedLog(p, max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, p
}

func mustWrite(t *testing.T, w io.Writer, s string) {
	t.Helper()
	n, err := w.Write([]byte(s))
	if err != nil {
		t.Fatalf("Write(%d bytes): %v", len(s), err)
	}
	if n != len(s) {
		t.Errorf("Write(%d bytes) = %d: an io.Writer must report the whole write when it returns no error", len(s), n)
	}
}

func TestCappedLogUnderCap(t *testing.T) {
	l, p := openTestLog(t, 100)
	mustWrite(t, l, "hello\n")
	mustWrite(t, l, "world\n")
	if got := readOrEmpty(t, p); got != "hello\nworld\n" {
		t.Errorf("log holds %q", got)
	}
	if _, err := os.Stat(p + ".1"); !os.IsNotExist(err) {
		t.Errorf("rotated under the cap (stat %s.1: %v)", p, err)
	}
}

func TestCappedLogExactlyAtCap(t *testing.T) {
	l, p := openTestLog(t, 10)
	mustWrite(t, l, "12345")
	mustWrite(t, l, "67890")
	if got := readOrEmpty(t, p); got != "1234567890" {
		t.Errorf("log holds %q, want the cap's worth without rotating", got)
	}
	if got := readOrEmpty(t, p+".1"); got != "" {
		t.Errorf("rotated file holds %q at exactly the cap", got)
	}
}

func TestCappedLogRotates(t *testing.T) {
	l, p := openTestLog(t, 10)
	mustWrite(t, l, "aaaaaaaa") // 8
	mustWrite(t, l, "bbbb")     // would make 12: rotate
	if got := readOrEmpty(t, p+".1"); got != "aaaaaaaa" {
		t.Errorf("%s.1 holds %q, want the older data", p, got)
	}
	if got := readOrEmpty(t, p); got != "bbbb" {
		t.Errorf("log holds %q, want only the newest data", got)
	}
	mustWrite(t, l, "cccccc") // 10: fits
	mustWrite(t, l, "dd")     // 12: rotate again, replacing .1
	if got := readOrEmpty(t, p+".1"); got != "bbbbcccccc" {
		t.Errorf("%s.1 holds %q after the second rotation", p, got)
	}
	if got := readOrEmpty(t, p); got != "dd" {
		t.Errorf("log holds %q after the second rotation", got)
	}
}

func TestCappedLogBounded(t *testing.T) {
	const max = 64
	l, p := openTestLog(t, max)
	var all strings.Builder
	for i := range 500 {
		s := strings.Repeat(string(rune('a'+i%26)), 1+i%13) + "\n"
		all.WriteString(s)
		mustWrite(t, l, s)
		cur, old := readOrEmpty(t, p), readOrEmpty(t, p+".1")
		if len(cur) > max || len(old) > max {
			t.Fatalf("after write %d: log %d bytes, .1 %d bytes; each must be ≤ %d", i, len(cur), len(old), max)
		}
		if len(cur)+len(old) > 2*max {
			t.Fatalf("after write %d: %d bytes kept, want ≤ %d", i, len(cur)+len(old), 2*max)
		}
		// What is kept is the newest output, in order: .1 then the log
		// form a suffix of everything written.
		if !strings.HasSuffix(all.String(), old+cur) {
			t.Fatalf("after write %d: kept %q, not the end of the output", i, old+cur)
		}
	}
}

func TestCappedLogLargeWriteKeepsTail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first string // written before the large write; "" for an empty log
	}{
		{"empty log", ""},
		{"non-empty log", "old\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, p := openTestLog(t, 8)
			if tc.first != "" {
				mustWrite(t, l, tc.first)
			}
			mustWrite(t, l, "0123456789abcdef")
			if got := readOrEmpty(t, p); got != "89abcdef" {
				t.Errorf("log holds %q, want the write's last 8 bytes", got)
			}
			if got := readOrEmpty(t, p+".1"); got != tc.first {
				t.Errorf("%s.1 holds %q, want %q", p, got, tc.first)
			}
		})
	}
}

// io.Copy, which os/exec uses to feed a non-file Stdout, stops with
// ErrShortWrite when a Write reports fewer bytes than it was given.
func TestCappedLogWithIOCopy(t *testing.T) {
	l, p := openTestLog(t, 1024)
	src := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB, more than the cap
	n, err := io.Copy(l, bytes.NewReader(src))
	if err != nil {
		t.Fatalf("io.Copy into the log: %d bytes, %v", n, err)
	}
	if n != int64(len(src)) {
		t.Errorf("io.Copy copied %d bytes, want %d", n, len(src))
	}
	got := readOrEmpty(t, p+".1") + readOrEmpty(t, p)
	if !bytes.HasSuffix(src, []byte(got)) || len(got) == 0 {
		t.Errorf("kept %d bytes that are not the end of the output", len(got))
	}
}

func TestCappedLogNoCap(t *testing.T) {
	l, p := openTestLog(t, 0)
	big := strings.Repeat("x", 10000)
	mustWrite(t, l, big)
	mustWrite(t, l, big)
	if got := readOrEmpty(t, p); len(got) != 20000 {
		t.Errorf("uncapped log holds %d bytes, want 20000", len(got))
	}
	if _, err := os.Stat(p + ".1"); !os.IsNotExist(err) {
		t.Errorf("uncapped log rotated (stat: %v)", err)
	}
}

func TestCappedLogAppendsToExisting(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stderr.log")
	if err := os.WriteFile(p, []byte("12345678"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := openCappedLog(p, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mustWrite(t, l, "ab") // 10: fits with what was there
	if got := readOrEmpty(t, p); got != "12345678ab" {
		t.Errorf("log holds %q, want the existing content appended to", got)
	}
	mustWrite(t, l, "c") // 11: the existing size counts toward the cap
	if got := readOrEmpty(t, p+".1"); got != "12345678ab" {
		t.Errorf("%s.1 holds %q", p, got)
	}
	if got := readOrEmpty(t, p); got != "c" {
		t.Errorf("log holds %q", got)
	}
}

func TestCappedLogWriteAfterClose(t *testing.T) {
	l, p := openTestLog(t, 100)
	mustWrite(t, l, "before\n")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := l.Write([]byte("after\n"))
	if err != nil {
		t.Errorf("Write after Close: %v, want nil (dropped)", err)
	}
	if n != len("after\n") {
		t.Errorf("Write after Close = %d, want %d", n, len("after\n"))
	}
	if got := readOrEmpty(t, p); got != "before\n" {
		t.Errorf("log holds %q, want only what was written before Close", got)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenCappedLogMissingDir(t *testing.T) {
	if _, err := openCappedLog(filepath.Join(t.TempDir(), "no", "x.log"), 10); err == nil {
		t.Error("openCappedLog in a missing directory succeeded, want an error")
	}
}
