package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// source is where a pass reads Nodes and Pods. The objects are shared
// with the source's cache: a pass reads them and copies before writing.
type source interface {
	list(ctx context.Context) ([]*corev1.Node, []*corev1.Pod, error)
	// orgs is each namespace's org, from its LabelOrg label.
	orgs(ctx context.Context) (map[string]string, error)
}

// listSource reads with two consistent lists per pass: what New uses, so
// that a pass sees every write made before it (tests, one-off passes).
type listSource struct{ cs kubernetes.Interface }

func (l listSource) list(ctx context.Context) ([]*corev1.Node, []*corev1.Pod, error) {
	nodes, err := l.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	pods, err := l.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: livePods})
	if err != nil {
		return nil, nil, err
	}
	ns := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		ns[i] = &nodes.Items[i]
	}
	ps := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		ps[i] = &pods.Items[i]
	}
	return ns, ps, nil
}

func (l listSource) orgs(ctx context.Context) (map[string]string, error) {
	list, err := l.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: LabelOrg})
	if err != nil {
		return nil, err
	}
	ns := make([]*corev1.Namespace, len(list.Items))
	for i := range list.Items {
		ns[i] = &list.Items[i]
	}
	return orgsOf(ns), nil
}

// livePods leaves out pods that have finished: they hold no GPUs. It is
// kube-scheduler's selector for the same reason.
var livePods = fields.AndSelectors(fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed))).String()

// watchSource is client-go's shared informers on Nodes and live Pods: a
// list once, then a watch, so a pass reads memory instead of listing
// every pod in the cluster. It is eventually consistent: a pod berth
// bound a moment ago may still show unbound. The scheduler's assumed
// binds cover that (assume.go), and every write is preconditioned, so a
// stale read costs a failed write at worst, never a double allocation.
type watchSource struct {
	factory informers.SharedInformerFactory
	nodes   listersv1.NodeLister
	pods    listersv1.PodLister
	spaces  listersv1.NamespaceLister
	synced  []cache.InformerSynced
	// kick is signalled (never blocking) on every change: the loop runs
	// a pass soon after work arrives or GPUs free up.
	kick chan struct{}
}

func newWatchSource(cs kubernetes.Interface) *watchSource {
	f := informers.NewSharedInformerFactory(cs, 0)
	w := &watchSource{factory: f, kick: make(chan struct{}, 1)}
	podInf := coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = livePods })
	f.InformerFor(&corev1.Pod{}, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer { return podInf })
	nodeInf, nsInf := f.Core().V1().Nodes(), f.Core().V1().Namespaces()
	w.nodes, w.pods, w.spaces = nodeInf.Lister(), listersv1.NewPodLister(podInf.GetIndexer()), nsInf.Lister()
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.poke() },
		UpdateFunc: func(any, any) { w.poke() },
		DeleteFunc: func(any) { w.poke() },
	}
	if _, err := podInf.AddEventHandler(h); err != nil {
		panic(err) // only when the informer has stopped, which it has not
	}
	if _, err := nodeInf.Informer().AddEventHandler(h); err != nil {
		panic(err)
	}
	// A namespace's org label moves its pods to another quota.
	if _, err := nsInf.Informer().AddEventHandler(h); err != nil {
		panic(err)
	}
	w.synced = []cache.InformerSynced{podInf.HasSynced, nodeInf.Informer().HasSynced, nsInf.Informer().HasSynced}
	return w
}

func (w *watchSource) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// start runs the informers until ctx ends and waits for their first list.
func (w *watchSource) start(ctx context.Context) error {
	w.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.synced...) {
		return errors.New("kube: the node, pod and namespace caches did not sync")
	}
	return nil
}

func (w *watchSource) list(context.Context) ([]*corev1.Node, []*corev1.Pod, error) {
	nodes, err := w.nodes.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("node cache: %w", err)
	}
	pods, err := w.pods.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("pod cache: %w", err)
	}
	return nodes, pods, nil
}

func (w *watchSource) orgs(context.Context) (map[string]string, error) {
	ns, err := w.spaces.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("namespace cache: %w", err)
	}
	return orgsOf(ns), nil
}
