package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOpenStateCreatesDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "state")
	s, err := openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if st, err := os.Stat(filepath.Join(dir, "allocs")); err != nil || !st.IsDir() {
		t.Errorf("allocs directory not created: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "lock")); err != nil {
		t.Errorf("lock file not created: %v", err)
	}
	if got, want := s.allocDir("job-1.r0"), filepath.Join(dir, "allocs", "job-1.r0"); got != want {
		t.Errorf("allocDir = %q, want %q", got, want)
	}
}

func TestOpenStateRequiresDir(t *testing.T) {
	_, err := openState("")
	if err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("openState(\"\") = %v, want an error naming --state-dir", err)
	}
}

func TestOpenStateNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := openState(file)
	if err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("openState(a file) = %v, want an error naming --state-dir", err)
	}
}

func TestOpenStateLocks(t *testing.T) {
	dir := t.TempDir()
	first, err := openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := openState(dir)
	if err == nil {
		second.close()
		t.Fatal("second openState on a locked dir succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "another agent") {
		t.Errorf("second openState error %q does not mention another agent", err)
	}
	// A different directory is not affected.
	other, err := openState(t.TempDir())
	if err != nil {
		t.Fatalf("openState on another dir while the first is held: %v", err)
	}
	other.close()

	if err := first.close(); err != nil {
		t.Fatal(err)
	}
	third, err := openState(dir)
	if err != nil {
		t.Fatalf("openState after the first closed: %v", err)
	}
	third.close()
}

func TestNextEpochSequence(t *testing.T) {
	dir := t.TempDir()
	for want := uint64(1); want <= 3; want++ {
		s, err := openState(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.nextEpoch()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("open %d: nextEpoch = %d, want %d", want, got, want)
		}
		b, err := os.ReadFile(filepath.Join(dir, "epoch"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(b)) != strconv.FormatUint(want, 10) {
			t.Errorf("epoch file holds %q after epoch %d", b, want)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "epoch.tmp")); !os.IsNotExist(err) {
		t.Errorf("epoch.tmp left behind (stat err %v)", err)
	}
}

func TestNextEpochFromExistingFile(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          uint64
	}{
		{"plain", "41", 42},
		{"newline", "41\n", 42},
		{"spaces", "  7 \n", 8},
		{"empty file", "", 0},
		{"garbage", "forty-one\n", 0},
		{"negative", "-3\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "epoch")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := openState(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			got, err := s.nextEpoch()
			if tc.want == 0 {
				if err == nil {
					t.Fatalf("nextEpoch with epoch file %q = %d, want an error", tc.content, got)
				}
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not name the file %s", err, p)
				}
				// The corrupt file is left as it was, for the operator.
				if b, _ := os.ReadFile(p); string(b) != tc.content {
					t.Errorf("corrupt epoch file rewritten to %q", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("nextEpoch = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWriteFileSync(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, content := range []string{"first\n", "second, longer\n", "3\n"} {
		if err := writeFileSync(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != content {
			t.Errorf("file holds %q, want %q", b, content)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "f" {
		t.Errorf("directory holds %v, want only f (no .tmp)", names)
	}
}

func TestWriteFileSyncMissingDir(t *testing.T) {
	if err := writeFileSync(filepath.Join(t.TempDir(), "no", "such", "f"), []byte("x")); err == nil {
		t.Error("writeFileSync into a missing directory succeeded, want an error")
	}
}
