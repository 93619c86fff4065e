package agent

import (
	"os"
	"sync"
)

// cappedLog is an allocation's log file, kept under a size cap: when a
// write would pass it, the file moves to <name>.1 (replacing the previous
// one) and a new file starts. At most twice the cap is kept per stream,
// and the newest output is never the part dropped.
type cappedLog struct {
	mu   sync.Mutex
	path string
	max  int64
	f    *os.File
	size int64
}

func openCappedLog(path string, max int64) (*cappedLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &cappedLog{path: path, max: max, f: f, size: st.Size()}, nil
}

func (l *cappedLog) Write(p []byte) (int, error) {
	whole := len(p) // io.Writer: report the whole write, even if capped
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return len(p), nil // closed: the process outlived its log; drop
	}
	if l.max > 0 && l.size > 0 && l.size+int64(len(p)) > l.max {
		l.f.Close()
		_ = os.Rename(l.path, l.path+".1")
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			l.f = nil
			return 0, err
		}
		l.f, l.size = f, 0
	}
	if l.max > 0 && int64(len(p)) > l.max {
		p = p[int64(len(p))-l.max:] // one write larger than the cap: keep its end
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	if err != nil {
		return n, err
	}
	return whole, nil
}

func (l *cappedLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
