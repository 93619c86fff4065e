package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBadInput: every malformed or impossible request is a 400 naming the
// field, with the error shape, and writes nothing.
func TestBadInput(t *testing.T) {
	c := newCluster(t)
	teamA := c.token("team:a")
	c.mustJSON(teamA, "POST", "/v1/deployments", `{"name":"svc","replica_shape":{"gpus":1,"topology":"node"},"min_replicas":1,"max_replicas":2,"image":"x"}`, 201, nil)
	c.waitActual("svc", 1)

	// A body just over the cap: a valid job whose name pads it past 1 MiB.
	huge := `{"name":"` + strings.Repeat("x", maxBody) + `","gpus":1,"topology":"any"}`
	job := func(fields string) string {
		return `{"name":"bad","image":"x",` + fields + `}`
	}
	for _, tc := range []struct {
		name        string
		method, url string
		body        string
		field       string
		// msg must appear in the message (the expectation), when set.
		// A shape too big for the cluster may name gpus or topology.
		msg string
	}{
		{"unknown topology", "POST", "/v1/jobs", job(`"gpus":1,"topology":"rack"`), "topology", "node, pod, any"},
		{"missing topology", "POST", "/v1/jobs", job(`"gpus":1`), "topology", "required"},
		{"gpus 0", "POST", "/v1/jobs", job(`"gpus":0,"topology":"any"`), "gpus", "at least 1"},
		{"gpus negative", "POST", "/v1/jobs", job(`"gpus":-8,"topology":"node"`), "gpus", ""},
		{"more than a node", "POST", "/v1/jobs", job(`"gpus":9,"topology":"node"`), "gpus", ""},
		{"more than a node can ever be", "POST", "/v1/jobs", job(`"gpus":65,"topology":"node"`), "gpus", ""},
		{"more than a pod", "POST", "/v1/jobs", job(`"gpus":17,"topology":"pod"`), "gpus", ""},
		{"more than the cluster", "POST", "/v1/jobs", job(`"gpus":25,"topology":"any"`), "gpus", ""},
		{"absurd gpus", "POST", "/v1/jobs", job(`"gpus":9223372036854775807,"topology":"any"`), "gpus", ""},
		{"unknown gpu model", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","gpu_model":"B200"`), "gpu_model", ""},
		{"more cpu than a node", "POST", "/v1/jobs", job(`"gpus":1,"topology":"node","cpu_milli":999999999`), "cpu_milli", ""},
		// Once accepted and bound with a negative share (int64 overflow
		// in the per-node arithmetic), wedging the node's agent.
		{"cpu that overflows a share", "POST", "/v1/jobs", job(`"gpus":2,"topology":"node","cpu_milli":6917529027641081856`), "cpu_milli", "expected 0 to"},
		{"memory that overflows a share", "POST", "/v1/jobs", job(`"gpus":8,"topology":"node","memory_mib":4611686018427387904`), "memory_mib", "expected 0 to"},
		{"preemptible without checkpoint", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","preemptible":true`), "checkpoint", ""},
		{"preemptible with no checkpoint path", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","preemptible":true,"checkpoint":{"path":"","bytes":0}`), "checkpoint.path", ""},
		{"checkpoint without path", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"bytes":10}`), "checkpoint.path", ""},
		{"bad max_runtime", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","max_runtime":"three days"`), "max_runtime", "duration"},
		{"negative max_runtime", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","max_runtime":"-1h"`), "max_runtime", ""},
		{"bad checkpoint interval", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"path":"/ck","bytes":1,"interval":"often"}`), "checkpoint.interval", ""},
		{"priority out of range", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","priority":2000000`), "priority", ""},
		{"no name", "POST", "/v1/jobs", `{"gpus":1,"topology":"any","image":"x"}`, "name", ""},
		{"no command or image", "POST", "/v1/jobs", `{"name":"x","gpus":1,"topology":"any","env":{"A":"b"}}`, "command", ""},
		{"unknown field", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","colour":"red"`), "colour", "unknown field"},
		{"unknown nested field", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"path":"/c","bytes":1,"sizze":2}`), "sizze", ""},
		{"wrong type", "POST", "/v1/jobs", job(`"gpus":"eight","topology":"any"`), "gpus", "int"},
		{"wrong nested type", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"path":"/c","bytes":"big"}`), "checkpoint.bytes", ""},
		{"not an object", "POST", "/v1/jobs", `[1,2]`, "body", ""},
		{"malformed JSON", "POST", "/v1/jobs", `{"name":"x","gpus":`, "", "body"},
		{"not JSON at all", "POST", "/v1/jobs", `name=x&gpus=1`, "", "JSON"},
		{"empty body", "POST", "/v1/jobs", ``, "", "empty"},
		{"trailing object", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any"`) + `{"name":"again"}`, "", "more"},
		{"trailing garbage", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any"`) + ` xyz`, "", ""},
		{"body over 1 MiB", "POST", "/v1/jobs", huge, "", "too large"},
		{"long idempotency key", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any"`), "Idempotency-Key", ""},

		{"deployment unknown topology", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"rack"},"max_replicas":1}`, "replica_shape.topology", ""},
		{"deployment gpus 0", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":0,"topology":"node"},"max_replicas":1}`, "replica_shape.gpus", ""},
		{"readiness with both checks", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1,"command":["serve"],"readiness":{"http":"/healthz","command":["true"]}}`, "readiness", ""},
		{"readiness http neither path nor URL", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1,"command":["serve"],"readiness":{"http":"healthz"}}`, "readiness.http", ""},
		{"readiness without a workload", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1,"readiness":{"http":"/healthz"}}`, "readiness", ""},
		{"heartbeat checkpoint stats nonsense", "POST", "/v1/agent/heartbeat", `{"node_id":"n1","boot_epoch":1,"gpus":8,"model":"H100","allocations":[{"id":"x","state":"running","checkpoint_stats":{"bytes":-1,"seconds":0,"at":"2026-01-01T00:00:00Z"}}]}`, "allocations", ""},
		{"deployment too big", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":9,"topology":"node"},"max_replicas":1}`, "replica_shape", ""},
		{"deployment bad name", "POST", "/v1/deployments", `{"name":"Chat A","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "name", ""},
		{"deployment max below min", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"node"},"min_replicas":2,"max_replicas":1}`, "max_replicas", ""},
		{"deployment unknown field", "POST", "/v1/deployments", `{"name":"d","replicas":3}`, "replicas", ""},
		{"scale missing", "PATCH", "/v1/deployments/svc", `{}`, "desired_replicas", "required"},
		{"scale negative", "PATCH", "/v1/deployments/svc", `{"desired_replicas":-1}`, "desired_replicas", ""},
		{"scale wrong type", "PATCH", "/v1/deployments/svc", `{"desired_replicas":"3"}`, "desired_replicas", ""},
		{"scale unknown field", "PATCH", "/v1/deployments/svc", `{"min_replicas":0}`, "min_replicas", ""},
		{"quota negative", "PUT", "/v1/quotas/default/a", `{"guaranteed_gpus":-1}`, "guaranteed_gpus", ""},
		{"quota bad scope", "PUT", "/v1/quotas/a/b/c/d", `{"guaranteed_gpus":1}`, "scope", ""},
		{"quota unknown field", "PUT", "/v1/quotas/default/a", `{"gpus":1}`, "gpus", ""},
		{"heartbeat without node", "POST", "/v1/agent/heartbeat", `{"boot_epoch":1,"model":"H100","gpus":8}`, "node_id", ""},
		{"heartbeat without epoch", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","model":"H100","gpus":8}`, "boot_epoch", ""},
		{"heartbeat gpus", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":65}`, "gpus", ""},
		{"heartbeat bad fault", "POST", "/v1/agent/heartbeat", `{"node_id":"n1","boot_epoch":1,"model":"H100","gpus":8,"faults":[{"gpu":9,"kind":"xid"}]}`, "faults", ""},
		{"heartbeat ragged links", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":2,"links":{"links":[[0,1]]}}`, "links", ""},
		{"heartbeat links with an empty row", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":2,"links":{"links":[[0,1],[]]}}`, "links", ""},
		{"heartbeat mig beyond the gpus", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":1,"mig":[[428],[428]]}`, "mig", "2 GPUs listed"},
		{"heartbeat mig over one gpu", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":1,"mig":[[428,428,428]]}`, "mig", "more than one GPU"},
		{"heartbeat mig instance size", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":1,"mig":[[0]]}`, "mig", "between 1 and 1000"},
		{"token unknown field", "POST", "/v1/tokens", `{"role":"admin","scope":"x"}`, "scope", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.tableState()
			var header []string
			if tc.field == "Idempotency-Key" {
				header = []string{"Idempotency-Key", strings.Repeat("k", 257)}
			}
			status, data, err := c.try(c.admin, tc.method, tc.url, tc.body, header...)
			if err != nil {
				t.Fatal(err)
			}
			if status != 400 {
				t.Fatalf("status %d, want 400: %.300s", status, data)
			}
			e := parseError(t, data)
			if e.Code != "invalid" || e.Field != tc.field && !(tc.field == "gpus" && e.Field == "topology") {
				t.Errorf("error %+v, want code invalid naming field %q", e, tc.field)
			}
			if tc.msg != "" && !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q does not say %q", e.Message, tc.msg)
			}
			if diff := cmp.Diff(before, c.tableState()); diff != "" {
				t.Errorf("a refused request changed the table (-before +after):\n%s", diff)
			}
		})
	}
}
