package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/berthsched/berth/internal/control"
)

// decode reads a multi-document manifest into typed objects.
func decode(t *testing.T, path string) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
	return out
}

// The manifests under deploy/kubernetes decode, the berth config in them
// loads, and the RBAC they grant is enough: berth runs a pass that binds,
// evicts, says why a pod waits and takes the Lease as the service account
// they create, not as an administrator.
func TestManifestsGrantWhatBerthNeeds(t *testing.T) {
	dir := "../../deploy/kubernetes"
	for _, f := range []string{"deployment.yaml", "example-gang.yaml"} {
		decode(t, filepath.Join(dir, f))
	}
	var berthYAML string
	for _, o := range decode(t, filepath.Join(dir, "config.yaml")) {
		berthYAML = o.(*corev1.ConfigMap).Data["berth.yaml"]
	}
	cfgFile := filepath.Join(t.TempDir(), "berth.yaml")
	os.WriteFile(cfgFile, []byte(berthYAML), 0o600)
	var cc control.Config
	if err := control.LoadFile(cfgFile, &cc); err != nil {
		t.Fatalf("deploy/kubernetes/config.yaml's berth.yaml: %v", err)
	}
	ctx := context.Background()
	for _, o := range decode(t, filepath.Join(dir, "rbac.yaml")) {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = kc.cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = kc.cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = kc.cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = kc.cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = kc.cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = kc.cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("rbac.yaml: unexpected %T", o)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tok, err := kc.cs.CoreV1().ServiceAccounts("berth-system").CreateToken(ctx, "berth-scheduler", &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(&rest.Config{Host: kc.cfg.Host, BearerToken: tok.Status.Token, TLSClientConfig: kc.cfg.TLSClientConfig})
	if err != nil {
		t.Fatal(err)
	}
	// Not an administrator: it may not create nodes.
	if _, err := sa.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the service account created a node: %v", err)
	}
	e := newEnv(t)
	t.Cleanup(func() {
		kc.cs.CoreV1().ConfigMaps("berth-system").Delete(ctx, "berth-scheduler", metav1.DeleteOptions{})
		kc.cs.CoordinationV1().Leases("berth-system").Delete(ctx, "berth-scheduler", metav1.DeleteOptions{})
	})
	e.node("a", 8, "leaf1")
	e.pod("low", 8, ann(AnnPreemptible, "true", AnnCheckpoint, "s3://c", AnnCheckpointBytes, "1000000000"))
	e.pod("wide", 16)
	cfg := Config{Namespace: "berth-system", Sched: cc.Sched}
	cfg.Sched.MinRuntime = time.Nanosecond
	s := New(sa, cfg, 1)
	if err := s.Takeover(ctx); err != nil {
		t.Fatalf("takeover as the service account: %v", err)
	}
	if _, err := s.Pass(ctx); err != nil {
		t.Fatalf("pass as the service account: %v", err)
	}
	if node, _ := e.boundTo("low"); node != "a" {
		t.Fatalf("low bound to %q", node)
	}
	if e.condition("wide") == "" || len(e.events("wide")) == 0 {
		t.Fatal("wide has no pending condition or event")
	}
	rs := e.replicaSet("web")
	e.pod("web-1", 8, ownedBy(rs), ann(AnnMinReplicas, "1"))
	if _, err := s.Pass(ctx); err != nil {
		t.Fatalf("evicting pass as the service account: %v", err)
	}
	if e.get("low").DeletionTimestamp == nil {
		t.Fatal("low was not evicted")
	}
	// The Lease: a replica leads as the service account.
	lctx, cancel := context.WithCancel(ctx)
	led := make(chan int64, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(lctx, sa, Config{Namespace: "berth-system"}, Election{Identity: "r1", LeaseDuration: 2 * time.Second,
			RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond, Interval: 100 * time.Millisecond,
			OnPass: func(f int64, err error) {
				if err == nil {
					select {
					case led <- f:
					default:
					}
				}
			}})
	}()
	select {
	case <-led:
	case <-time.After(20 * time.Second):
		t.Fatal("the service account never led a clean pass")
	}
	cancel()
	<-done
}
