package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthsched/berth/internal/server"
)

// TestSaveTokenWholeOrNothing: a reader polling for the admin token file
// (a script, a test) never sees it empty or cut short, even while it is
// written over again and again; the file is its owner's alone.
func TestSaveTokenWholeOrNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "admin.token")
	secret := "berth_" + strings.Repeat("0123456789abcdef", 256) // long enough to be written in pieces
	var done atomic.Bool
	var bad atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			b, err := os.ReadFile(path)
			if err == nil && strings.TrimSpace(string(b)) != secret {
				bad.Add(1)
			}
		}
	}()
	for range 300 {
		if err := server.SaveToken(path, secret); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("a reader saw the token file empty or partial %d times", n)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("temporary files left beside the token: %v", ents)
	}
}
