package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/berthsched/berth/internal/model"
)

// SlurmConfig is the Slurm under test.
type SlurmConfig struct {
	// Dir holds its config, state, logs and job output (made if missing).
	Dir   string
	Nodes []model.Node
	// Berth is the binary whose `workload train` the jobs run.
	Berth string
	// GPUsOnly submits node jobs as --gpus=G with no node count, the way
	// many users ask Slurm for GPUs: Slurm may then spread them over
	// nodes, which the table's "node jobs spread over nodes" counts.
	// Off: -N1 --gres=gpu:G, the declared constraint.
	GPUsOnly bool
	Logger   *slog.Logger
}

// Slurm is a running one-host Slurm: munged, slurmctld, a slurmd per
// node.
type Slurm struct {
	cfg   SlurmConfig
	env   []string
	procs []*exec.Cmd
	opt   Options

	mu       sync.Mutex
	replicas map[string][]string // service → its replica job IDs, oldest first
	seq      map[string]int
	placed   map[string]string // job ID/run → its GPUs, node:indices
	started  time.Time
}

// slurmBinaries are what the harness runs, all from Debian's slurm-wlm
// munge, slurmdbd and
// mariadb-server packages.
var slurmBinaries = []string{"munged", "mungekey", "slurmctld", "slurmd", "slurmdbd", "sbatch", "squeue", "scancel", "sinfo", "scontrol", "sacct", "sacctmgr", "mariadb-install-db", "mariadbd"}

// findBinary looks in PATH, then the sbin directories a non-root PATH
// lacks.
func findBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(d, name); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found; install Debian's slurm-wlm and munge packages (apt-get install slurm-wlm slurmdbd munge mariadb-server)", name)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// StartSlurm writes the config and starts the daemons, returning once
// every node is up with its GPUs.
func StartSlurm(ctx context.Context, cfg SlurmConfig, opt Options) (*Slurm, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("berth bench slurm: must run as root (slurmd runs jobs as root here, and the fake GPUs are device files made with mknod)")
	}
	for _, b := range slurmBinaries {
		if _, err := findBinary(b); err != nil {
			return nil, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	// munged (as user munge) must reach its directory below this one.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			return nil, fmt.Errorf("--dir: %s is inside %s, which user munge cannot enter (mode %v): choose a directory under one it can (/tmp, /var/tmp)", dir, p, st.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	ports, err := freePorts(len(cfg.Nodes) + 2)
	if err != nil {
		return nil, err
	}
	s := &Slurm{cfg: cfg, opt: opt, replicas: map[string][]string{}, seq: map[string]int{}, placed: map[string]string{}, started: time.Now()}
	socket, err := s.startMunge()
	if err != nil {
		s.Stop()
		return nil, err
	}
	dbSocket, err := s.startDB()
	if err != nil {
		s.Stop()
		return nil, err
	}
	if err := slurmFiles(dir, cfg.Nodes, ports[0], ports[1], ports[2:], socket, dbSocket); err != nil {
		s.Stop()
		return nil, err
	}
	s.env = append(os.Environ(), "SLURM_CONF="+filepath.Join(dir, "slurm.conf"), "MYSQL_UNIX_PORT="+dbSocket)
	if err := s.daemon("slurmdbd", "-D"); err != nil {
		s.Stop()
		return nil, err
	}
	// The cluster must exist in the database before slurmctld registers.
	if err := s.retry(ctx, 60*time.Second, "sacctmgr", "-i", "add", "cluster", "berthpeer"); err != nil {
		s.Stop()
		return nil, fmt.Errorf("slurmdbd did not come up (logs in %s/log): %w", dir, err)
	}
	if err := s.daemon("slurmctld", "-D", "-i"); err != nil {
		s.Stop()
		return nil, err
	}
	for _, n := range cfg.Nodes {
		if err := s.daemon("slurmd", "-D", "-N", n.ID); err != nil {
			s.Stop()
			return nil, err
		}
	}
	if err := s.waitIdle(ctx, 90*time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("slurm did not come up (logs in %s/log): %w", dir, err)
	}
	return s, nil
}

// startMunge makes a key and runs munged as user munge on a socket of
// its own, so the host's munge (if any) is left alone.
func (s *Slurm) startMunge() (string, error) {
	dir := filepath.Join(s.cfg.Dir, "munge")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	key := filepath.Join(dir, "munge.key")
	if _, err := os.Stat(key); err != nil {
		mk, _ := findBinary("mungekey")
		if out, err := exec.Command(mk, "-c", "-k", key).CombinedOutput(); err != nil {
			return "", fmt.Errorf("mungekey: %v: %s", err, out)
		}
	}
	if out, err := exec.Command("chown", "-R", "munge:munge", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chown munge (is the munge package installed?): %v: %s", err, out)
	}
	// munged refuses a socket directory others can write, and needs to
	// reach it as munge.
	run := filepath.Join(s.cfg.Dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command("chown", "munge:munge", run).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chown munge: %v: %s", err, out)
	}
	socket := filepath.Join(run, "munge.sock")
	md, _ := findBinary("munged")
	cmd := exec.Command("runuser", "-u", "munge", "--", md, "--foreground", "--key-file="+key, "--socket="+socket,
		"--pid-file="+filepath.Join(run, "munged.pid"), "--log-file="+filepath.Join(dir, "munged.log"), "--seed-file="+filepath.Join(dir, "munged.seed"))
	if err := s.spawn(cmd, "munged"); err != nil {
		return "", err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil {
			return socket, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("munged: no socket at %s after 10s (log: %s)", socket, filepath.Join(dir, "munged.log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startDB runs a MariaDB of its own for slurmdbd, on a unix socket
// only, root by socket authentication.
func (s *Slurm) startDB() (string, error) {
	data := filepath.Join(s.cfg.Dir, "db")
	if _, err := os.Stat(filepath.Join(data, "mysql")); err != nil {
		p, _ := findBinary("mariadb-install-db")
		if out, err := exec.Command(p, "--no-defaults", "--datadir="+data, "--user=root", "--auth-root-authentication-method=socket", "--skip-test-db").CombinedOutput(); err != nil {
			return "", fmt.Errorf("mariadb-install-db: %v: %s", err, out)
		}
	}
	socket := filepath.Join(s.cfg.Dir, "run", "mysql.sock")
	p, _ := findBinary("mariadbd")
	if err := s.spawn(exec.Command(p, "--no-defaults", "--datadir="+data, "--socket="+socket, "--skip-networking", "--user=root",
		"--log-error="+filepath.Join(s.cfg.Dir, "log", "mariadb.log"), "--pid-file="+filepath.Join(s.cfg.Dir, "run", "mariadb.pid")), "mariadbd"); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			return socket, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("mariadbd: no socket at %s after 30s (log: %s)", socket, filepath.Join(s.cfg.Dir, "log", "mariadb.log"))
		}
	}
}

// retry runs a client command until it succeeds or limit passes.
func (s *Slurm) retry(ctx context.Context, limit time.Duration, name string, args ...string) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := s.cmd(ctx, name, args...)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *Slurm) daemon(name string, args ...string) error {
	p, err := findBinary(name)
	if err != nil {
		return err
	}
	cmd := exec.Command(p, args...)
	cmd.Env = s.env
	return s.spawn(cmd, name)
}

// spawn starts a daemon in its own process group, its output in the log
// directory.
func (s *Slurm) spawn(cmd *exec.Cmd, name string) error {
	log, err := os.OpenFile(filepath.Join(s.cfg.Dir, "log", name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		if err := os.MkdirAll(filepath.Join(s.cfg.Dir, "log"), 0o755); err != nil {
			return err
		}
		if log, err = os.OpenFile(filepath.Join(s.cfg.Dir, "log", name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return err
		}
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group (Stop signals the group); and if the harness
	// dies without Stop (kill -9), the daemon is told to end too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	log.Close()
	s.procs = append(s.procs, cmd)
	return nil
}

// Stop ends every job (scancel), then the daemons, slurmds first.
func (s *Slurm) Stop() error {
	if len(s.env) > 0 {
		// Every job first: slurmstepd outlives slurmd by design, so the
		// jobs' processes end only through scancel (SIGTERM, then SIGKILL
		// after KillWait).
		ctx := context.Background()
		_, _ = s.cmd(ctx, "scancel", "--user=root")
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			out, err := s.cmd(ctx, "squeue", "-h", "-t", "PD,CF,R,CG,S")
			if err != nil || strings.TrimSpace(out) == "" {
				break
			}
		}
		s.writeHistory(ctx)
	}
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	s.procs = nil
	return nil
}

// SacctFormat is the sacct field list the harness writes its history
// with, and docs/slurm.md tells a site to use.
const SacctFormat = "JobID,JobName,Partition,QOS,Account,Submit,Start,End,State,NNodes,AllocTRES"

// writeHistory saves what slurmdbd recorded, every run of every job
// (-D: a requeued job's earlier runs too), as sacct.txt beside the
// jobcomp log: the history `berth sim run --workload slurm` replays.
func (s *Slurm) writeHistory(ctx context.Context) {
	out, err := s.cmd(ctx, "sacct", "-a", "-P", "-X", "-D", "-S", s.started.Add(-time.Minute).Format("2006-01-02T15:04:05"), "--format="+SacctFormat)
	if err != nil {
		s.cfg.Logger.Warn("bench slurm: sacct", "err", err)
		return
	}
	if err := os.WriteFile(filepath.Join(s.cfg.Dir, "sacct.txt"), []byte(out), 0o644); err != nil {
		s.cfg.Logger.Warn("bench slurm: sacct", "err", err)
	}
}

// cmd runs a Slurm client command and returns its stdout.
func (s *Slurm) cmd(ctx context.Context, name string, args ...string) (string, error) {
	p, err := findBinary(name)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, p, args...)
	c.Env = s.env
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// waitIdle waits until sinfo shows every node idle with its GPUs.
func (s *Slurm) waitIdle(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for {
		out, err := s.cmd(ctx, "sinfo", "-h", "-N", "-p", "train", "-o", "%N %t %G")
		if err == nil {
			idle := 0
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(l)
				if len(f) == 3 && f[1] == "idle" && strings.HasPrefix(f[2], "gpu:") {
					idle++
				}
			}
			if idle == len(s.cfg.Nodes) {
				return nil
			}
			last = fmt.Sprintf("%d of %d nodes idle with GPUs", idle, len(s.cfg.Nodes))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %s", limit, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// freePorts asks the kernel for n free TCP ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
