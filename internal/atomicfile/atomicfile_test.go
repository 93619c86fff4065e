package atomicfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthsched/berth/internal/atomicfile"
)

// TestWriteWholeOrNothing: a reader polling the file while it is written
// over and over sees only whole contents; the permissions are the ones
// asked for; no temporary file is left.
func TestWriteWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	data := []byte(strings.Repeat("0123456789abcdef", 1024))
	var done atomic.Bool
	var bad atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			if b, err := os.ReadFile(path); err == nil && string(b) != string(data) {
				bad.Add(1)
			}
		}
	}()
	for range 200 {
		if err := atomicfile.Write(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("a reader saw the file partial %d times", n)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%v, mode %v; want 0600", err, st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
}
