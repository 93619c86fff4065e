package kube

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/berthsched/berth/internal/store"
)

// cluster is a real kube-apiserver on berth's embedded etcd, with no
// kubelet and no controller manager: what is bound stays bound, which is
// what the tests assert.
type cluster struct {
	cs   *kubernetes.Clientset
	cfg  *rest.Config
	stop func()
}

// apiserverBinary is the kube-apiserver scripts/kube-apiserver built (the
// README's test command builds it first). BERTH_KUBE_APISERVER names
// another.
func apiserverBinary() (string, error) {
	if p := os.Getenv("BERTH_KUBE_APISERVER"); p != "" {
		return p, nil
	}
	out, err := exec.Command("../../scripts/kube-apiserver").Output()
	if err != nil {
		return "", fmt.Errorf("scripts/kube-apiserver: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startCluster(dir string) (*cluster, error) {
	bin, err := apiserverBinary()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(context.Background(), store.Config{DataDir: filepath.Join(dir, "etcd")})
	if err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	saPub, saKey := filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	os.WriteFile(saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
	os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	token := "berth-test-admin"
	tokens := filepath.Join(dir, "tokens.csv")
	os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--etcd-servers="+strings.Join(st.Endpoints(), ","),
		"--etcd-prefix=/kube",
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		// No controller manager creates the default service account.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
		// The kubernetes Service's endpoint would be loopback, which the
		// reconciler refuses; nothing here needs it.
		"--endpoint-reconciler-type=none",
		"--v=0")
	logf, _ := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		st.Close()
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := &cluster{stop: func() {
		cmd.Process.Kill()
		<-exited
		logf.Close()
		st.Close()
	}}
	c.cfg = &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", port), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 500, Burst: 1000}
	if c.cs, err = kubernetes.NewForConfig(c.cfg); err != nil {
		c.stop()
		return nil, err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		body, err := c.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err == nil && string(body) == "ok" {
			return c, nil
		}
		select {
		case werr := <-exited:
			exited <- werr
			c.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "kube-apiserver.log"))
			return nil, fmt.Errorf("kube-apiserver exited: %v\n%s", werr, tail(log, 3000))
		default:
		}
		if time.Now().After(deadline) {
			c.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "kube-apiserver.log"))
			return nil, fmt.Errorf("kube-apiserver not ready after 90 s: %v\n%s", err, tail(log, 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

var kc *cluster

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-kube-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kc, err = startCluster(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting kube-apiserver:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	kc.stop()
	os.RemoveAll(dir)
	os.Exit(code)
}
