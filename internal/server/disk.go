package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berthsched/berth/internal/api"
)

// The disk guard. The embedded etcd writes its log and database under the
// data dir, and etcd treats a write that fails for want of space as fatal:
// the process exits. So the server watches the free space there and
// refuses the writes it can refuse (every state-changing API request)
// while it is below a reserve, leaving that reserve to the writes it must
// not refuse (heartbeats' exits, the loop's bindings, etcd's next WAL
// segment, 64 MiB). Reads go on working; /readyz says why writes do not;
// writes work again as soon as space returns. Nothing is acknowledged
// that was not committed, so a refused write loses nothing.

// DefaultMinFreeDisk is the reserve: one WAL segment and room to compact.
const DefaultMinFreeDisk = 256 << 20

// diskGuard holds the last measurement: nil while there is room.
type diskGuard struct {
	dir     string
	reserve uint64
	low     atomic.Pointer[api.Error]
}

// freeBytes is the space an unprivileged writer may use on dir's
// filesystem.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// check measures once and logs each change of state plainly.
func (s *Server) checkDisk() {
	g := s.disk
	free, err := freeBytes(g.dir)
	var e *api.Error
	switch {
	case err != nil:
		e = &api.Error{Code: "disk_unavailable", Message: fmt.Sprintf("the data dir %s cannot be examined (%v): writes are refused until it can; reads still work", g.dir, err)}
	case free < g.reserve:
		e = &api.Error{Code: "disk_full", Message: fmt.Sprintf("no space left on device: %s has %d MiB free, below the %d MiB reserve the table needs; writes are refused until space returns; reads still work",
			g.dir, free>>20, g.reserve>>20)}
	}
	was := g.low.Swap(e)
	switch {
	case e != nil && was == nil:
		s.log.Error("data dir low on space: refusing writes", "path", g.dir, "free_mib", free>>20, "reserve_mib", g.reserve>>20, "err", e.Message)
	case e == nil && was != nil:
		s.log.Info("data dir has room again: accepting writes", "path", g.dir, "free_mib", free>>20)
	}
	s.metrics.diskFree(free)
}

// watchDisk measures every second until ctx ends.
func (s *Server) watchDisk(ctx context.Context) {
	if s.disk == nil {
		return
	}
	s.checkDisk()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.checkDisk()
		}
	}
}

// diskLow is the error writes get while the disk is short, nil otherwise.
func (s *Server) diskLow() *api.Error {
	if s.disk == nil {
		return nil
	}
	return s.disk.low.Load()
}

// refuseWhenDiskLow answers a write with 503 and Retry-After while the
// data dir is below its reserve.
func (s *Server) refuseWhenDiskLow(w http.ResponseWriter, r *http.Request) bool {
	e := s.diskLow()
	if e == nil {
		return false
	}
	w.Header().Set("Retry-After", "10")
	writeJSON(w, http.StatusServiceUnavailable, api.ErrorBody{Error: *e})
	return true
}
