package main

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestMemoryLimit checks where the server's soft memory limit comes
// from: the flag when given (0 meaning none), else 90% of the
// container's limit, else none; and that a container that cannot be read
// leaves the runtime's limit as it was.
func TestMemoryLimit(t *testing.T) {
	for _, v := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} {
		t.Setenv(v, "") // restored after the test
		os.Unsetenv(v)  // set, even empty, either overrides the container
	}
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const gib = int64(1) << 30
	noLimit := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	ratio := memoryLimitRatio // not a constant: 4 GiB × 0.9 is no whole number
	at90 := int64(float64(4<<30) * ratio)
	unreadable := func() (uint64, error) { return 0, errors.New("no cgroup here") }
	for _, c := range []struct {
		name      string
		given     bool
		flag      int64
		container memlimit.Provider
		want      int64
	}{
		{"flag", true, 3 * gib, memlimit.Limit(8 << 30), 3 * gib},
		{"flag 0 is none, whatever the container", true, 0, memlimit.Limit(8 << 30), math.MaxInt64},
		{"the container's, at 90%", false, 0, memlimit.Limit(4 << 30), at90},
		{"no container limit", false, 0, noLimit, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			got := setMemoryLimit(c.given, c.flag, c.container, quiet)
			if runtime := debug.SetMemoryLimit(-1); got != c.want || runtime != c.want {
				t.Fatalf("limit %d, runtime's %d; want %d", got, runtime, c.want)
			}
		})
	}
	t.Run("an unreadable container leaves the limit", func(t *testing.T) {
		debug.SetMemoryLimit(5 * gib)
		if got := setMemoryLimit(false, 0, unreadable, quiet); got != 5*gib || debug.SetMemoryLimit(-1) != 5*gib {
			t.Fatalf("limit %d, runtime's %d; want %d kept", got, debug.SetMemoryLimit(-1), 5*gib)
		}
	})
}
