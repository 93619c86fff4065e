package ha

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// report appends one failover figure to $BERTH_HA_REPORT, when set, for
// BENCHMARKS.md: go test ./internal/ha -count=5 with BERTH_HA_REPORT=file.
func report(t *testing.T, what string, took time.Duration, n int) {
	p := os.Getenv("BERTH_HA_REPORT")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Logf("report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\t%s\t%d\n", what, took.Round(time.Millisecond), n)
}
