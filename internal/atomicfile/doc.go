// Package atomicfile replaces a file whole or not at all: a reader (an
// agent restarted mid-write, a script polling for the admin token, the
// next run of a job resuming from its checkpoint) sees the old contents
// or the new, never a part. The standard library's os.WriteFile
// truncates and writes in place; this writes a unique temporary file
// beside the target, syncs it, renames it over the target and syncs the
// directory, so the rename survives a crash too.
package atomicfile
