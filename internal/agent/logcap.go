package agent

import (
	"fmt"
	"io"
	"os"
)

// An allocation's stdout and stderr are files the workload holds itself:
// the agent opens them (append-only) and hands the descriptors over, so a
// workload never writes into a pipe whose reader may die with the agent
// (SIGPIPE would kill it). The size cap is kept from outside instead, the
// way logrotate's copytruncate does it: when a file passes the cap, its
// content moves to <name>.1 (replacing the previous one) and the file is
// truncated in place. The workload's descriptor is append-only, so its
// next write lands at the new end. What this costs: the cap is checked
// every second, so a file can pass it by a second's output, and a write
// that lands between the copy and the truncate is lost. At most about
// twice the cap is kept per stream.

// openLog opens (creating) an allocation log for appending.
func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
}

// capLog rotates path when it is over max bytes; max ≤ 0 is no cap. A
// log that is missing (the workload never wrote) is not an error.
func capLog(path string, max int64) error {
	if max <= 0 {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() <= max {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	// Keep the newest max bytes: the oldest output is the part dropped.
	if _, err := src.Seek(st.Size()-max, io.SeekStart); err != nil {
		return err
	}
	tmp := path + ".1.tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path+".1"); err != nil {
		return err
	}
	return os.Truncate(path, 0)
}

// appendLine writes one line from the agent into a log: how a workload
// hears why it failed to start, or of an application-level GPU error.
func appendLine(path, format string, args ...any) {
	f, err := openLog(path)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "[berth agent] "+format+"\n", args...)
}
