package agent

import (
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

// heldLog is a log as a workload holds it: the descriptor the agent
// opened, written to directly.
func heldLog(t *testing.T) (*os.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdout.log")
	f, err := openLog(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

func write(t *testing.T, f *os.File, s string) {
	t.Helper()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestCapLogUnderCapLeavesTheFile(t *testing.T) {
	f, path := heldLog(t)
	write(t, f, "0123456789")
	if err := capLog(path, 10); err != nil {
		t.Fatal(err)
	}
	if got := readOrEmpty(t, path); got != "0123456789" {
		t.Errorf("log %q, want it untouched", got)
	}
	if _, err := os.Stat(path + ".1"); !os.IsNotExist(err) {
		t.Errorf("%s.1 exists at exactly the cap: %v", path, err)
	}
}

func TestCapLogRotatesKeepingTheNewest(t *testing.T) {
	f, path := heldLog(t)
	write(t, f, "old-old-new-new!")
	if err := capLog(path, 8); err != nil {
		t.Fatal(err)
	}
	if got := readOrEmpty(t, path+".1"); got != "new-new!" {
		t.Errorf("rotated %q, want the newest 8 bytes", got)
	}
	if got := readOrEmpty(t, path); got != "" {
		t.Errorf("log %q after rotation, want it empty", got)
	}
	// The workload's append-only descriptor writes at the new end, not
	// at its old offset (which would leave a hole of NULs).
	write(t, f, "next")
	if got := readOrEmpty(t, path); got != "next" {
		t.Errorf("log %q after the workload wrote again, want %q", got, "next")
	}
}

func TestCapLogBoundsWhatIsKept(t *testing.T) {
	f, path := heldLog(t)
	for i := range 50 {
		write(t, f, strings.Repeat(string(rune('a'+i%26)), 7))
		if err := capLog(path, 20); err != nil {
			t.Fatal(err)
		}
		cur, old := len(readOrEmpty(t, path)), len(readOrEmpty(t, path+".1"))
		if cur > 20 || old > 20 {
			t.Fatalf("after write %d: log %d bytes and rotated %d, cap 20", i, cur, old)
		}
	}
	if got := readOrEmpty(t, path+".1") + readOrEmpty(t, path); !strings.HasSuffix(got, strings.Repeat("x", 7)) {
		t.Errorf("kept output %q does not end with the newest write", got)
	}
}

func TestCapLogNoCapAndNoFile(t *testing.T) {
	f, path := heldLog(t)
	write(t, f, strings.Repeat("z", 100))
	if err := capLog(path, 0); err != nil {
		t.Fatal(err)
	}
	if got := len(readOrEmpty(t, path)); got != 100 {
		t.Errorf("log %d bytes with no cap, want 100", got)
	}
	if err := capLog(filepath.Join(t.TempDir(), "never-written.log"), 10); err != nil {
		t.Errorf("a log never written: %v, want no error", err)
	}
}

func TestAppendLineAddsToTheLog(t *testing.T) {
	f, path := heldLog(t)
	write(t, f, "workload\n")
	appendLine(path, "XID %d on GPU %d", 13, 2)
	if got, want := readOrEmpty(t, path), "workload\n[berth agent] XID 13 on GPU 2\n"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
}
