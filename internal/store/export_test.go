package store

import "time"

// SetLoadPage sets how many keys one read of a load takes, for tests of
// a table larger than a page; it returns the undo.
func SetLoadPage(n int64) func() {
	old := loadPage
	loadPage = n
	return func() { loadPage = old }
}

// DropWatch makes the table watch deliver nothing while drop returns
// true, and shortens the stall timeout to d; it returns the undo.
func DropWatch(drop func() bool, d time.Duration) func() {
	old := stallAfter
	watchDrop, stallAfter = drop, d
	return func() { watchDrop, stallAfter = nil, old }
}

// PickURLs makes the embedded member's port picks come from pick; it
// returns the undo.
func PickURLs(pick func() (string, error)) func() {
	old := pickURL
	pickURL = pick
	return func() { pickURL = old }
}

// FreeURL is the picker PickURLs replaces.
var FreeURL = freeURL
