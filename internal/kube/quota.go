package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/berthsched/berth/internal/model"
)

// Quotas under Kubernetes. A namespace is a team, and its org is the
// namespace's LabelOrg label: a Namespace is written by whoever
// administers the cluster, not by the tenants whose pods run in it, so a
// team cannot move itself out of its org's quota by relabelling its own
// objects (a pod annotation could). The quota tree itself (org and
// org/team scopes, guaranteed_gpus and max_gpus) is the config file's
// quotas: Kubernetes has no object for "guaranteed, and borrowed beyond
// it", and a ResourceQuota on nvidia.com/gpu already caps what a
// namespace may create before berth sees it. User scopes are not
// mapped: the only user a pod names is one its author wrote.
//
// As in the server, quotas bound training only. Inference is not under
// quota in either mode, and here a pod's author may call it inference
// (berth.dev/kind, or a ReplicaSet): a cluster that must bound what a
// namespace's inference takes sets a ResourceQuota on nvidia.com/gpu.

// LabelOrg on a Namespace names the org its team (the namespace) is in.
const LabelOrg = "berth.dev/org"

// DefaultOrg is the org of a namespace without LabelOrg, as the server's
// default org.
const DefaultOrg = "default"

// orgsOf is each labelled namespace's org.
func orgsOf(namespaces []*corev1.Namespace) map[string]string {
	out := map[string]string{}
	for _, ns := range namespaces {
		if v, ok := ns.Labels[LabelOrg]; ok {
			out[ns.Name] = v
		}
	}
	return out
}

// orgOf is namespace ns's org, or why its label cannot be one.
func (w *world) orgOf(ns string) (string, error) {
	v, ok := w.orgs[ns]
	switch {
	case !ok:
		return DefaultOrg, nil
	case v == "" || v != strings.ToLower(v) || strings.Contains(v, "/"):
		return "", fmt.Errorf("namespace %s: label %s: %q: expected a lowercase org name", ns, LabelOrg, v)
	}
	return v, nil
}

// CheckQuotas refuses quotas that cannot apply in this mode: each
// scope is an org or an org/namespace.
func CheckQuotas(qs []model.Quota) error {
	seen := map[string]bool{}
	for i, q := range qs {
		if err := q.Validate(); err != nil {
			return fmt.Errorf("quotas[%d].%w", i, err)
		}
		if q.Scope != strings.ToLower(q.Scope) {
			return fmt.Errorf("quotas[%d].scope: %q: expected lowercase (an org label and a namespace are)", i, q.Scope)
		}
		if strings.Count(q.Scope, "/") > 1 {
			return fmt.Errorf("quotas[%d].scope: %q: expected org or org/namespace (pods name no user berth can trust)", i, q.Scope)
		}
		if seen[q.Scope] {
			return fmt.Errorf("quotas[%d].scope: %q is given twice", i, q.Scope)
		}
		seen[q.Scope] = true
	}
	return nil
}
