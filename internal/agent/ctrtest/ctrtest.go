package ctrtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Image is the test image: busybox's binary and a few of its applets.
const Image = "localhost/berth-test/busybox:latest"

// Runtime is Debian's runc: podman's default runtime, crun, cannot run in
// the test machine's hybrid cgroups.
const Runtime = "/usr/sbin/runc"

// Args are the options every test container needs: ulimits below the
// sandbox's hard limits (podman raises them otherwise, and is refused).
var Args = []string{"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1000:1000"}

var (
	once     sync.Once
	podman   string
	setupErr error
)

// Setup finds podman and runc and builds Image once; it returns podman's
// path. The error says what to install.
func Setup() (string, error) {
	once.Do(func() { podman, setupErr = setup() })
	return podman, setupErr
}

func setup() (string, error) {
	p, err := exec.LookPath("podman")
	if err != nil {
		return "", errors.New("no podman: the container driver's tests run a real one; install Debian's podman, runc and busybox-static (scripts/test does)")
	}
	if _, err := os.Stat(Runtime); err != nil {
		return "", fmt.Errorf("no %s: install Debian's runc (scripts/test does)", Runtime)
	}
	if exec.Command(p, "--runtime", Runtime, "image", "exists", Image).Run() == nil {
		return p, nil
	}
	return p, build(p)
}

func build(podman string) error {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return errors.New("no busybox: install Debian's busybox-static (scripts/test does)")
	}
	root, err := os.MkdirTemp("", "berth-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	for _, d := range []string{"bin", "tmp", "proc", "sys", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		return err
	}
	for _, c := range []string{"sh", "sleep", "cat", "env", "echo", "test", "touch", "head", "tr", "ls", "mkdir", "httpd"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", c)); err != nil {
			return err
		}
	}
	tar := exec.Command("tar", "-C", root, "-c", ".")
	imp := exec.Command(podman, "--runtime", Runtime, "import", "-", Image)
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	var out strings.Builder
	imp.Stdout, imp.Stderr = &out, &out
	if err := tar.Start(); err != nil {
		return err
	}
	if err := imp.Run(); err != nil {
		return fmt.Errorf("podman import: %v: %s", err, out.String())
	}
	return tar.Wait()
}

// Remove removes every container labelled with the agent state directory
// dir: what a test left (containers outlive the test process).
func Remove(podman, dir string) {
	out, _ := exec.Command(podman, "--runtime", Runtime, "ps", "--all", "--quiet", "--filter", "label=berth.state="+dir).Output()
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command(podman, "--runtime", Runtime, "rm", "--force", "--time", "0", id).Run()
	}
}

// Exists reports whether a container of that name exists.
func Exists(podman, name string) bool {
	return exec.Command(podman, "--runtime", Runtime, "container", "exists", name).Run() == nil
}
