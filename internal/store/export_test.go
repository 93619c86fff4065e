package store

// SetLoadPage sets how many keys one read of a load takes, for tests of
// a table larger than a page; it returns the undo.
func SetLoadPage(n int64) func() {
	old := loadPage
	loadPage = n
	return func() { loadPage = old }
}
