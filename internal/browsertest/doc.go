// Package browsertest is what the pages' tests share: finding the real
// browser (Debian's chromium, which scripts/test installs) they drive.
// It is for tests only; nothing in berth imports it.
package browsertest
