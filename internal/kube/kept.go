package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/berthsched/berth/internal/sched"
)

// keptState is what berth keeps between passes that the API server's
// objects do not say: the reservations (R2's total order), the
// preemptions of the last hour (R6's budget) and the alerts already
// raised (so an Event is posted once per alert, not once per pass).
type keptState struct {
	Fence        int64                    `json:"fence"`
	Reservations []sched.Reservation      `json:"reservations,omitempty"`
	Preemptions  []sched.PreemptionRecord `json:"preemptions,omitempty"`
	Alerts       map[string]sched.Alert   `json:"alerts,omitempty"`
}

// stateKey is the ConfigMap data key holding keptState as JSON.
const stateKey = "state.json"

// stateStore reads and writes keptState in one ConfigMap.
type stateStore struct {
	cs        kubernetes.Interface
	namespace string
	name      string
	rv        string // resourceVersion last read or written
}

// load reads the kept state; a missing ConfigMap is an empty state.
func (s *stateStore) load(ctx context.Context) (keptState, error) {
	var k keptState
	cm, err := s.cs.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.rv = ""
		return k, nil
	}
	if err != nil {
		return k, err
	}
	s.rv = cm.ResourceVersion
	if raw := cm.Data[stateKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &k); err != nil {
			return keptState{}, fmt.Errorf("configmap %s/%s: %s: %w", s.namespace, s.name, stateKey, err)
		}
	}
	return k, nil
}

// save writes the state if the ConfigMap is still the one last read (a
// resourceVersion precondition) and carries no newer fence: a deposed
// leader's save fails.
func (s *stateStore) save(ctx context.Context, k keptState) error {
	raw, err := json.Marshal(k)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, ResourceVersion: s.rv,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "berth"}}, Data: map[string]string{stateKey: string(raw)}}
	var out *corev1.ConfigMap
	if s.rv == "" {
		out, err = s.cs.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
	} else {
		out, err = s.cs.CoreV1().ConfigMaps(s.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	s.rv = out.ResourceVersion
	return nil
}

// trim drops preemption records older than the budget's hour.
func (k *keptState) trim(now time.Time) {
	keep := k.Preemptions[:0]
	for _, r := range k.Preemptions {
		if now.Sub(r.At) <= time.Hour {
			keep = append(keep, r)
		}
	}
	k.Preemptions = keep
}
