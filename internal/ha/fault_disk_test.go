package ha

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthsched/berth/internal/api"
)

// smallDisk starts one `berth server` whose data dir is a filesystem of
// its own that the test can fill: a tmpfs of sizeMiB mounted in a mount
// namespace of the server's own (unshare; no privilege needed beyond a
// user namespace). It returns the data dir as the test reaches it
// (through /proc/<pid>/root) and the reserve in force. Where the machine
// refuses the namespace, the data dir stays on the host's disk and the
// reserve is set just under what is free there, so that the test's
// ballast crosses it the same way.
func smallDisk(t *testing.T, sizeMiB, reserveMiB uint64) (*cluster, *member, string, uint64) {
	t.Helper()
	c := &cluster{t: t}
	m := &member{name: "s0", api: freePort(t), peer: freePort(t), client: freePort(t), dir: filepath.Join(t.TempDir(), "s0")}
	c.members = []*member{m}
	data := filepath.Join(m.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	args := []string{"server", "--listen", m.api, "--data-dir", data, "--name", m.name,
		"--etcd-client-url", "http://" + m.client, "--etcd-peer-url", "http://" + m.peer,
		"--initial-cluster", m.name + "=http://" + m.peer, "--election-ttl", ttl.String(), "--heartbeat-interval", "200ms", "--log-json"}
	namespaced := exec.Command("unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$0\"", data).Run() == nil
	var cmd *exec.Cmd
	if namespaced {
		args = append(args, "--min-free-disk-mib", strconv.FormatUint(reserveMiB, 10))
		script := fmt.Sprintf(`mount -t tmpfs -o size=%dm tmpfs "$0" && exec "$@"`, sizeMiB)
		cmd = exec.Command("unshare", append([]string{"-rm", "sh", "-c", script, data, berth}, args...)...)
	} else {
		free, err := freeMiB(data)
		if err != nil {
			t.Fatal(err)
		}
		reserveMiB = free - 64
		t.Logf("no mount namespace here: the reserve is set 64 MiB under the %d MiB free on the host's disk", free)
		cmd = exec.Command(berth, append(args, "--min-free-disk-mib", strconv.FormatUint(reserveMiB, 10))...)
	}
	log, err := os.OpenFile(filepath.Join(m.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	m.log, m.cmd = log, cmd
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.done = make(chan struct{})
	go func() { cmd.Wait(); close(m.done) }()
	t.Cleanup(func() { c.kill(m) })
	seen := data
	if namespaced {
		seen = fmt.Sprintf("/proc/%d/root%s", cmd.Process.Pid, data)
	}
	view := &member{dir: seen, api: m.api, done: m.done}
	if c.admin, err = waitAdmin(view, 60*time.Second); err != nil {
		b, _ := os.ReadFile(filepath.Join(m.dir, "server.log"))
		t.Fatalf("server on a small disk: %v\n%s", err, b)
	}
	return c, m, seen, reserveMiB
}

func freeMiB(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize) >> 20, nil
}

// TestFaultFullDiskRefusesWritesKeepsReads: with the data dir's disk
// filled below the reserve, the server stays up and says so plainly:
// writes get 503 naming "no space left on device" and the path, reads
// still work, /readyz reports it, the log says it; when the space comes
// back, writes work again, and every write acknowledged before, during
// and after is in the table.
func TestFaultFullDiskRefusesWritesKeepsReads(t *testing.T) {
	c, m, data, reserve := smallDisk(t, 384, 96)
	var (
		mu    sync.Mutex
		acked []string
		stop  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() { // a client submitting throughout, as users would
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			st, body, _, err := request(m.api, c.admin, http.MethodPost, "/v1/jobs", longJob(fmt.Sprintf("w%d", i), 1))
			if err == nil && st == http.StatusAccepted {
				var acc api.JobAccepted
				if json.Unmarshal(body, &acc) == nil {
					mu.Lock()
					acked = append(acked, acc.JobID)
					mu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)

	free, err := freeMiB(data)
	if err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(data, "ballast")
	f, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	// 32 MiB past the reserve: on the fallback (the host's disk) that is
	// 96 MiB, not the disk.
	for range free - reserve + 32 {
		if _, err := f.Write(chunk); err != nil {
			break // the disk is full: the point
		}
	}
	f.Close()
	t.Logf("ballast written: %d MiB free of the data dir's disk, reserve %d MiB", must(freeMiB(data)), reserve)

	var refused string
	c.eventually("writes refused with a clear error", 10*time.Second, func() error {
		st, body, h, err := request(m.api, c.admin, http.MethodPost, "/v1/jobs", longJob("while-full", 1))
		if err != nil {
			return err
		}
		if st != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			return fmt.Errorf("%d %s", st, body)
		}
		refused = string(body)
		return nil
	})
	if !strings.Contains(refused, "no space left on device") || !strings.Contains(refused, "/data") {
		t.Errorf("refusal does not say what and where: %s", refused)
	}
	if st, body, _, err := request(m.api, c.admin, http.MethodGet, "/v1/jobs", nil); err != nil || st != 200 {
		t.Errorf("reads while the disk is full: %d %s %v", st, body, err)
	}
	if st, body, _, err := request(m.api, "", http.MethodGet, "/readyz", nil); err != nil || st != 503 || !strings.Contains(string(body), "no space left on device") {
		t.Errorf("/readyz while the disk is full: %d %s %v", st, body, err)
	}
	if log, _ := os.ReadFile(filepath.Join(m.dir, "server.log")); !strings.Contains(string(log), "no space left on device") {
		t.Errorf("the server log does not say the disk is full")
	}
	select {
	case <-m.done:
		t.Fatal("the server died on a full disk")
	default:
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	c.eventually("writes accepted once space returns", 10*time.Second, func() error {
		st, body, _, err := request(m.api, c.admin, http.MethodPost, "/v1/jobs", longJob("after-full", 1))
		if err != nil || st != http.StatusAccepted {
			return fmt.Errorf("%d %s %v", st, body, err)
		}
		return nil
	})
	report(t, "writes again after the disk had room", time.Since(t0), 1)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, id := range acked {
		if _, err := c.job(id); err != nil {
			t.Errorf("acknowledged job %s lost: %v", id, err)
		}
	}
	t.Logf("%d/%d acknowledged submits kept", len(acked), len(acked))
	if len(acked) < 10 {
		t.Errorf("only %d submits acknowledged: the client did not run", len(acked))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
