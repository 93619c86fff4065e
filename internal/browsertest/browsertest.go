package browsertest

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium finds the browser: $BERTH_CHROMIUM, else Debian's chromium,
// else the usual names; with none the test fails, saying how to get one.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("BERTH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: this test drives a real browser; install Debian's chromium (apt-get install chromium) or set BERTH_CHROMIUM")
	return ""
}
