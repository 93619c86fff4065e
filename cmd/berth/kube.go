package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berthsched/berth/internal/control"
	"github.com/berthsched/berth/internal/kube"
)

func newKubeCmd() *cobra.Command {
	var kubeconfig, configFile string
	var logJSON bool
	var listen string
	cfg := kube.Config{}
	el := kube.Election{}
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Schedule GPU pods on a Kubernetes cluster (pods with schedulerName: berth)",
		Long: `kube runs berth as a Kubernetes scheduler: the same scheduling core, its
reasons, largest_placeable, preemption order and budget, over Nodes and Pods
read from the API server. Pods whose schedulerName is --scheduler-name are
its work; a node's GPUs are its nvidia.com/gpu capacity, its leaf switch the
--pod-label label. Annotations (berth.dev/group, group-size, topology,
priority, preemptible, checkpoint, checkpoint-bytes) make pod groups,
topology constraints and preemptible training; pods owned by a ReplicaSet
are inference replicas and never preempted. A namespace is a team, its
Namespace's berth.dev/org label its org; --config's quotas section is the
quota tree over them. See docs/kubernetes.md.

Replicas elect a leader with a Lease in --namespace; every bind is fenced
on the pod, so a deposed leader's bind fails. It reads ~/.kube/config (or
--kubeconfig), or the in-cluster service account when run in a pod.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Logger = newLogger(cmd, logJSON)
			if configFile != "" {
				var cc control.Config
				if err := control.LoadFile(configFile, &cc); err != nil {
					return err
				}
				if err := kube.CheckQuotas(cc.Quotas); err != nil {
					return fmt.Errorf("%s: %w", configFile, err)
				}
				cfg.Sched, cfg.Quotas = cc.Sched, cc.Quotas
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			if el.Identity == "" {
				el.Identity, _ = os.Hostname()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if listen != "" {
				el.Status = kube.NewStatus()
				l, err := net.Listen("tcp", listen)
				if err != nil {
					return fmt.Errorf("--listen: %w", err)
				}
				srv := &http.Server{Handler: el.Status.Handler(), ReadHeaderTimeout: 5 * time.Second}
				go srv.Serve(l)
				defer srv.Close()
				cfg.Logger.Info("berth kube: serving /v1/kube/status and /metrics", "addr", l.Addr().String())
			}
			return kube.Run(ctx, cs, cfg, el)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&configFile, "config", "", "berth config file; its scheduler section applies (docs/config.md)")
	f.StringVar(&cfg.SchedulerName, "scheduler-name", "berth", "the schedulerName of the pods berth schedules")
	f.StringVar(&cfg.PodLabel, "pod-label", kube.DefaultPodLabel, "node label naming its leaf switch (berth's pod)")
	f.StringVar(&cfg.Namespace, "namespace", "berth-system", "namespace of berth's Lease and state ConfigMap")
	f.StringVar(&el.Identity, "identity", "", "this replica's name in the Lease (default: the hostname)")
	f.DurationVar(&el.Interval, "interval", time.Second, "time between scheduling passes")
	f.StringVar(&listen, "listen", "", "address to serve a status page on / (pending reasons, alerts and pages, free sets), its JSON on /v1/kube/status, and /metrics; empty: none")
	f.BoolVar(&logJSON, "log-json", false, "log as JSON")
	return cmd
}
