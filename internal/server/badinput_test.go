package server

import (
	"regexp"
	"strings"
	"testing"

	"github.com/berthsched/berth/internal/api"
	"github.com/google/go-cmp/cmp"
)

// TestBadInput: every malformed or impossible request is a 400 naming the
// field, with the error shape, and writes nothing.
func TestBadInput(t *testing.T) {
	c := newCluster(t)
	teamA := c.token("team:a")
	c.mustJSON(teamA, "POST", "/v1/deployments", `{"name":"svc","replica_shape":{"gpus":1,"topology":"node"},"min_replicas":1,"max_replicas":2,"image":"x"}`, 201, nil)
	c.waitActual("svc", 1)

	job := func(fields string) string {
		return `{"name":"bad","image":"x",` + fields + `}`
	}
	dep := func(fields string) string {
		return `{"name":"d","image":"x",` + fields + `}`
	}
	n := 0
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
		{"wrong type", "POST", "/v1/jobs", job(`"gpus":"eight","topology":"any"`), "gpus", "an integer"},
		{"wrong nested type", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"path":"/c","bytes":"big"}`), "checkpoint.bytes", ""},
		{"not an object", "POST", "/v1/jobs", `[1,2]`, "body", ""},
		{"malformed JSON", "POST", "/v1/jobs", `{"name":"x","gpus":`, "", "body"},
		{"not JSON at all", "POST", "/v1/jobs", `name=x&gpus=1`, "", "JSON"},
		{"empty body", "POST", "/v1/jobs", ``, "", "empty"},
		{"trailing object", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any"`) + `{"name":"again"}`, "", "more"},
		{"trailing garbage", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any"`) + ` xyz`, "", ""},

		{"long idempotency key", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any"`), "Idempotency-Key", ""},

		{"deployment unknown topology", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"rack"},"max_replicas":1}`, "replica_shape.topology", ""},
		{"deployment gpus 0", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":0,"topology":"node"},"max_replicas":1}`, "replica_shape.gpus", ""},
		{"readiness with both checks", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1,"command":["serve"],"readiness":{"http":"/healthz","command":["true"]}}`, "readiness", ""},
		{"readiness http neither path nor URL", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1,"command":["serve"],"readiness":{"http":"healthz"}}`, "readiness.http", ""},
		{"readiness without a workload", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1,"readiness":{"http":"/healthz"}}`, "readiness", ""},
		{"heartbeat checkpoint stats nonsense", "POST", "/v1/agent/heartbeat", `{"node_id":"n1","boot_epoch":1,"gpus":8,"model":"H100","allocations":[{"id":"x","state":"running","checkpoint_stats":{"bytes":-1,"seconds":0,"at":"2026-01-01T00:00:00Z"}}]}`, "allocations", ""},
		{"deployment too big", "POST", "/v1/deployments", `{"name":"d","replica_shape":{"gpus":9,"topology":"node"},"max_replicas":1}`, "replica_shape.gpus", "largest node has 8"},
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
		{"heartbeat mig_profiles with no mig", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":1,"mig_profiles":[["3g.40gb"]]}`, "mig_profiles", "0 MIG instances"},
		{"heartbeat mig_profiles not one per instance", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":1,"mig":[[428,428]],"mig_profiles":[["3g.40gb"]]}`, "mig_profiles", "one per instance"},
		{"heartbeat mig instance size", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":1,"mig":[[0]]}`, "mig", "between 1 and 1000"},
		{"token unknown field", "POST", "/v1/tokens", `{"role":"admin","scope":"x"}`, "scope", ""},

		// Numbers bounded by what this cluster could ever hold.
		{"cpu negative", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","cpu_milli":-1`), "cpu_milli", ""},
		{"memory negative", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","memory_mib":-1`), "memory_mib", ""},
		{"memory no node has, any", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","memory_mib":3000000`), "memory_mib", "memory"},
		{"memory no node has, node", "POST", "/v1/jobs", job(`"gpus":1,"topology":"node","memory_mib":3000000`), "memory_mib", ""},
		{"cpu no pod can carry", "POST", "/v1/jobs", job(`"gpus":16,"topology":"pod","cpu_milli":300000`), "cpu_milli", "largest pod"},
		{"cpu the cluster cannot carry", "POST", "/v1/jobs", job(`"gpus":24,"topology":"any","cpu_milli":400000`), "cpu_milli", "the cluster"},
		{"node request past the largest node", "POST", "/v1/jobs", job(`"gpus":200,"topology":"node"`), "gpus", "largest node has 8"},
		{"pod request past the largest pod", "POST", "/v1/jobs", job(`"gpus":20,"topology":"pod"`), "gpus", "largest pod has 16"},
		{"any request past the fleet", "POST", "/v1/jobs", job(`"gpus":100,"topology":"any"`), "gpus", "24 GPUs"},
		{"gpu_milli 1000", "POST", "/v1/jobs", job(`"gpus":1,"topology":"node","gpu_milli":1000`), "gpu_milli", ""},
		{"gpu_milli negative", "POST", "/v1/jobs", job(`"gpus":1,"topology":"node","gpu_milli":-5`), "gpu_milli", ""},
		{"gpu_milli over two gpus", "POST", "/v1/jobs", job(`"gpus":2,"topology":"node","gpu_milli":500`), "gpu_milli", ""},
		{"mig_profile without gpu_milli", "POST", "/v1/jobs", job(`"gpus":1,"topology":"node","mig_profile":"3g.40gb"`), "mig_profile", "gpu_milli must say its size"},
		{"mig_profile with a comma", "POST", "/v1/jobs", job(`"gpus":1,"topology":"node","gpu_milli":428,"mig_profile":"3g,40gb"`), "mig_profile", "such as 3g.40gb"},
		{"replica mig_profile without gpu_milli", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node","mig_profile":"1g.10gb"},"max_replicas":1`), "replica_shape.mig_profile", "gpu_milli must say its size"},
		{"checkpoint bytes past 1 PiB", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"path":"/ck","bytes":4611686018427387904}`), "checkpoint.bytes", "1 PiB"},
		{"checkpoint bytes negative", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"path":"/ck","bytes":-1}`), "checkpoint.bytes", ""},
		{"priority far below", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","priority":-2000000`), "priority", ""},
		{"priority past int64", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","priority":99999999999999999999`), "priority", "an integer"},
		{"gpus fractional", "POST", "/v1/jobs", job(`"gpus":1.5,"topology":"any"`), "gpus", "an integer"},
		{"gpus exponent", "POST", "/v1/jobs", job(`"gpus":1e400,"topology":"any"`), "gpus", ""},
		{"max_runtime overflow", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","max_runtime":"9999999999h"`), "max_runtime", ""},
		{"replicas past the fleet", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node"},"max_replicas":25`), "max_replicas", "at most 24"},
		{"replicas of 8 past the fleet", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":8,"topology":"node"},"max_replicas":4`), "max_replicas", "at most 3"},
		{"min replicas past the fleet", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node"},"min_replicas":30,"max_replicas":30`), "max_replicas", ""},
		{"a billion replicas", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"gpu_milli":100,"topology":"node"},"max_replicas":1000000000,"desired_replicas":1000000000`), "max_replicas", ""},
		{"share replicas past the fleet", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"gpu_milli":100,"topology":"node"},"max_replicas":241`), "max_replicas", "at most 240"},
		{"desired past the bound", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node"},"max_replicas":2,"desired_replicas":2000000`), "desired_replicas", ""},
		{"desired negative", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node"},"max_replicas":2,"desired_replicas":-1`), "desired_replicas", ""},
		{"min negative", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node"},"min_replicas":-1,"max_replicas":2`), "min_replicas", ""},
		{"replica cpu negative", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node","cpu_milli":-1},"max_replicas":1`), "replica_shape.cpu_milli", ""},
		{"replica memory no node has", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node","memory_mib":3000000},"max_replicas":1`), "replica_shape", "memory"},
		{"replica pod past the pod", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":17,"topology":"pod"},"max_replicas":1`), "replica_shape.gpus", "largest pod"},
		{"scale a billion", "PATCH", "/v1/deployments/svc", `{"desired_replicas":1000000000}`, "desired_replicas", ""},
		{"scale fractional", "PATCH", "/v1/deployments/svc", `{"desired_replicas":2.5}`, "desired_replicas", "an integer"},
		{"quota past the bound", "PUT", "/v1/quotas/default/a", `{"guaranteed_gpus":1000000000000}`, "guaranteed_gpus", ""},
		{"quota max below guaranteed", "PUT", "/v1/quotas/default/a", `{"guaranteed_gpus":8,"max_gpus":4}`, "max_gpus", ""},
		{"quota max past the bound", "PUT", "/v1/quotas/default/a", `{"max_gpus":1000000000000}`, "max_gpus", ""},
		{"heartbeat cpu past the bound", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":8,"cpu_milli":9223372036854775807}`, "cpu_milli", ""},
		{"heartbeat memory negative", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":8,"memory_mib":-1}`, "memory_mib", ""},
		{"heartbeat gpus 0", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":0}`, "gpus", ""},
		{"heartbeat negative epoch", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":-1,"model":"H100","gpus":8}`, "boot_epoch", ""},
		{"heartbeat uuids ragged", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":2,"gpu_uuids":["a"]}`, "gpu_uuids", ""},
		{"heartbeat fault kind", "POST", "/v1/agent/heartbeat", `{"node_id":"n1","boot_epoch":1,"model":"H100","gpus":8,"faults":[{"gpu":0,"kind":"meteor"}]}`, "faults", ""},
		{"heartbeat alloc state", "POST", "/v1/agent/heartbeat", `{"node_id":"n1","boot_epoch":1,"model":"H100","gpus":8,"allocations":[{"id":"x","state":"dancing"}]}`, "allocations", ""},
		{"heartbeat alloc without id", "POST", "/v1/agent/heartbeat", `{"node_id":"n1","boot_epoch":1,"model":"H100","gpus":8,"allocations":[{"state":"running"}]}`, "allocations", ""},
		{"heartbeat no model", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"gpus":8}`, "model", ""},

		// Names: one charset and length everywhere.
		{"job name with NUL", "POST", "/v1/jobs", `{"name":"a\u0000b","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name with CR LF", "POST", "/v1/jobs", `{"name":"a\r\nj-fake  running","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name with ESC", "POST", "/v1/jobs", `{"name":"\u001b[2Jx","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name with RTL override", "POST", "/v1/jobs", `{"name":"abc\u202egnp","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name with a space", "POST", "/v1/jobs", `{"name":"my job","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name with a slash", "POST", "/v1/jobs", `{"name":"../etc","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name too long", "POST", "/v1/jobs", `{"name":"` + strings.Repeat("a", 64) + `","image":"x","gpus":1,"topology":"any"}`, "name", "at most 63"},
		{"job name leading dash", "POST", "/v1/jobs", `{"name":"-x","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name trailing dot", "POST", "/v1/jobs", `{"name":"x.","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"job name not a string", "POST", "/v1/jobs", `{"name":7,"image":"x","gpus":1,"topology":"any"}`, "name", "a string"},
		{"job team uppercase", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","team":"Research"`), "team", ""},
		{"job org with a slash", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","org":"a/b","team":"c"`), "org", ""},
		{"job user with a space", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","org":"o","team":"t","user":"a b"`), "user", ""},
		{"job user without team", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","user":"u"`), "team", ""},
		{"gpu model with ESC", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","gpu_model":"H100\u001b[31m"`), "gpu_model", ""},
		{"image with a space", "POST", "/v1/jobs", `{"name":"x","image":"a b","gpus":1,"topology":"any"}`, "image", ""},
		{"image with a newline", "POST", "/v1/jobs", `{"name":"x","image":"a\nb","gpus":1,"topology":"any"}`, "image", ""},
		{"command with NUL", "POST", "/v1/jobs", `{"name":"x","command":["echo","a\u0000b"],"gpus":1,"topology":"any"}`, "command[1]", "NUL"},
		{"command program empty", "POST", "/v1/jobs", `{"name":"x","command":["","a"],"gpus":1,"topology":"any"}`, "command[0]", ""},
		{"command a string", "POST", "/v1/jobs", `{"name":"x","command":"rm -rf /","gpus":1,"topology":"any"}`, "command", "an array"},
		{"env not an object", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","env":["A=1"]`), "env", "an object"},
		{"env name with =", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","env":{"A=B":"1"}`), "env", ""},
		{"env name with a digit first", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","env":{"1A":"1"}`), "env", ""},
		{"env name empty", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","env":{"":"1"}`), "env", ""},
		{"env value with NUL", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","env":{"A":"x\u0000y"}`), "env.A", "NUL"},
		{"env value not a string", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","env":{"A":1}`), "env", "a string"},
		{"checkpoint path with NUL", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":{"path":"/ck\u0000"}`), "checkpoint.path", ""},
		{"checkpoint a string", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","checkpoint":"/ck"`), "checkpoint", "an object"},
		{"preemptible a string", "POST", "/v1/jobs", job(`"gpus":1,"topology":"any","preemptible":"yes"`), "preemptible", "true or false"},
		{"topology a number", "POST", "/v1/jobs", job(`"gpus":1,"topology":5`), "topology", "a string"},
		{"topology uppercase", "POST", "/v1/jobs", job(`"gpus":1,"topology":"NODE"`), "topology", ""},
		{"deployment named ..", "POST", "/v1/deployments", `{"name":"..","image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "name", ""},
		{"deployment name uppercase", "POST", "/v1/deployments", `{"name":"Chat","image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "name", "lowercase"},
		{"deployment name with CR LF", "POST", "/v1/deployments", `{"name":"a\r\nb","image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "name", ""},
		{"deployment name too long", "POST", "/v1/deployments", `{"name":"` + strings.Repeat("d", 64) + `","image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "name", ""},
		{"deployment without name or model", "POST", "/v1/deployments", `{"image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "name", "required"},
		{"deployment model gives no name", "POST", "/v1/deployments", `{"model":"///","image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "name", ""},
		{"deployment model with ESC", "POST", "/v1/deployments", `{"name":"m","model":"x\u001b]0;pwn\u0007","image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "model", ""},
		{"deployment team with three parts", "POST", "/v1/deployments", `{"name":"m","team":"a/b/c","image":"x","replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1}`, "team", ""},
		{"deployment env name bad", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1,"topology":"node"},"max_replicas":1,"env":{"A B":"1"}`), "env", ""},
		{"deployment shape not an object", "POST", "/v1/deployments", `{"name":"m","image":"x","replica_shape":4,"max_replicas":1}`, "replica_shape", "an object"},
		{"deployment no topology", "POST", "/v1/deployments", dep(`"replica_shape":{"gpus":1},"max_replicas":1`), "replica_shape.topology", "required"},
		{"quota scope uppercase", "PUT", "/v1/quotas/Default/a", `{"guaranteed_gpus":1}`, "scope", ""},
		{"quota scope with a space", "PUT", "/v1/quotas/default/a%20b", `{"guaranteed_gpus":1}`, "scope", ""},
		{"quota scope trailing dot", "PUT", "/v1/quotas/default/a.", `{"guaranteed_gpus":1}`, "scope", ""},
		{"quota scope with ESC", "PUT", "/v1/quotas/default/%1b", `{"guaranteed_gpus":1}`, "scope", ""},
		{"heartbeat node id with a slash", "POST", "/v1/agent/heartbeat", `{"node_id":"../n","boot_epoch":1,"model":"H100","gpus":8}`, "node_id", ""},
		{"heartbeat node id with CR LF", "POST", "/v1/agent/heartbeat", `{"node_id":"n\r\n9","boot_epoch":1,"model":"H100","gpus":8}`, "node_id", ""},
		{"heartbeat node id too long", "POST", "/v1/agent/heartbeat", `{"node_id":"` + strings.Repeat("n", 64) + `","boot_epoch":1,"model":"H100","gpus":8}`, "node_id", ""},
		{"heartbeat pod with a space", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","pod":"p 1","boot_epoch":1,"model":"H100","gpus":8}`, "pod", ""},
		{"heartbeat pool with ESC", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","pool":"\u001bx","boot_epoch":1,"model":"H100","gpus":8}`, "pool", ""},
		{"heartbeat model with NUL", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H\u0000","gpus":8}`, "model", ""},
		{"token role unknown", "POST", "/v1/tokens", `{"role":"root"}`, "role", ""},
		{"token role team empty", "POST", "/v1/tokens", `{"role":"team:"}`, "role", ""},
		{"token role team uppercase", "POST", "/v1/tokens", `{"role":"team:Alpha"}`, "role", ""},
		{"token role team three parts", "POST", "/v1/tokens", `{"role":"team:a/b/c"}`, "role", ""},
		{"token role agent path", "POST", "/v1/tokens", `{"role":"agent:../n1"}`, "role", ""},
		{"token role autoscaler ..", "POST", "/v1/tokens", `{"role":"autoscaler:.."}`, "role", ""},
		{"token role autoscaler of nothing", "POST", "/v1/tokens", `{"role":"autoscaler:nope"}`, "role", "no deployment"},
		{"token name with CR LF", "POST", "/v1/tokens", `{"role":"team:a","name":"ci\r\nadmin"}`, "name", ""},
		{"token ttl bad", "POST", "/v1/tokens", `{"role":"team:a","ttl":"soon"}`, "ttl", ""},
		{"token ttl negative", "POST", "/v1/tokens", `{"role":"team:a","ttl":"-1h"}`, "ttl", ""},
		{"token ttl past ten years", "POST", "/v1/tokens", `{"role":"team:a","ttl":"100000h"}`, "ttl", ""},
		{"token role a number", "POST", "/v1/tokens", `{"role":1}`, "role", "a string"},

		// Malformed bodies.
		{"null body", "POST", "/v1/jobs", `null`, "name", "required"},
		{"a string body", "POST", "/v1/jobs", `"job"`, "body", "an object"},
		{"a number body", "POST", "/v1/deployments", `42`, "body", "an object"},
		{"deep nesting", "POST", "/v1/jobs", `{"env":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "body", "nested too deeply"},
		{"duplicate key smuggling", "POST", "/v1/jobs", `{"name":"ok","name":"a\nb","image":"x","gpus":1,"topology":"any"}`, "name", ""},
		{"invalid UTF-8 name", "POST", "/v1/jobs", "{\"name\":\"a\xff\",\"image\":\"x\",\"gpus\":1,\"topology\":\"any\"}", "name", ""},
		{"BOM before the body", "POST", "/v1/jobs", "\ufeff" + job(`"gpus":1,"topology":"any"`), "", "body"},
		{"unterminated string", "POST", "/v1/jobs", `{"name":"x`, "", "body"},
		{"scale a null", "PATCH", "/v1/deployments/svc", `{"desired_replicas":null}`, "desired_replicas", "required"},
		{"scale an array", "PATCH", "/v1/deployments/svc", `[3]`, "body", "an object"},
		{"quota a string", "PUT", "/v1/quotas/default/a", `{"guaranteed_gpus":"8"}`, "guaranteed_gpus", "an integer"},
		{"heartbeat not an object", "POST", "/v1/agent/heartbeat", `[]`, "body", "an object"},
		{"heartbeat gpus a string", "POST", "/v1/agent/heartbeat", `{"node_id":"n9","boot_epoch":1,"model":"H100","gpus":"8"}`, "gpus", "an integer"},
		{"list jobs unknown state", "GET", "/v1/jobs?state=zombie", ``, "state", ""},
		{"list jobs state injection", "GET", "/v1/jobs?state=running%27%20OR%201%3D1", ``, "state", ""},
	} {
		n++
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
			if internalName.MatchString(e.Message) || strings.ContainsFunc(e.Message, api.Unprintable) {
				t.Errorf("message %q names an internal type or holds an unprintable character", e.Message)
			}
			if diff := cmp.Diff(before, c.tableState()); diff != "" {
				t.Errorf("a refused request changed the table (-before +after):\n%s", diff)
			}
		})
	}

	for _, tc := range statusCases {
		n++
		t.Run(tc.name, func(t *testing.T) {
			before := c.tableState()
			var body any
			if tc.body != "" {
				body = tc.body
			}
			status, data, err := c.try(c.admin, tc.method, tc.url, body)
			if err != nil {
				t.Fatal(err)
			}
			e := parseError(t, data)
			if status != tc.status || e.Code != tc.code || e.Message == "" {
				t.Fatalf("%d %+v, want %d %s with a message in the JSON error shape", status, e, tc.status, tc.code)
			}
			if tc.status == 405 && !strings.Contains(e.Message, "allowed") {
				t.Errorf("405 does not say what is allowed: %q", e.Message)
			}
			if tc.status == 413 && !strings.Contains(e.Message, "1 MiB") {
				t.Errorf("413 does not state the limit: %q", e.Message)
			}
			if strings.ContainsFunc(e.Message, api.Unprintable) {
				t.Errorf("message %q holds an unprintable character", e.Message)
			}
			if diff := cmp.Diff(before, c.tableState()); diff != "" {
				t.Errorf("a refused request changed the table (-before +after):\n%s", diff)
			}
		})
	}
	if n < 150 {
		t.Errorf("only %d hostile cases: the table lost rows", n)
	}
}

// internalName matches what only Go code would say: package-qualified
// type names, Go type syntax.
var internalName = regexp.MustCompile(`\b(api|model|sched|control|server|store|time)\.[A-Z]|\bint64\b|\bstruct\b|\[\]string|map\[|\bGo\b`)

// statusCases are refusals with a status other than 400, or a body
// other than a field error: not found (ids and paths, injection
// included), method not allowed, too large.
var statusCases = []struct {
	name, method, url, body string
	status                  int
	code                    string
}{
	{"no such endpoint", "GET", "/v1/nothing", "", 404, "not_found"},
	{"no such version", "GET", "/v2/jobs", "", 404, "not_found"},
	{"method not allowed on jobs", "PUT", "/v1/jobs", "{}", 405, "method_not_allowed"},
	{"method not allowed on topology", "DELETE", "/v1/cluster/topology", "", 405, "method_not_allowed"},
	{"method not allowed on a job", "PATCH", "/v1/jobs/x", "{}", 405, "method_not_allowed"},
	{"method not allowed on heartbeat", "GET", "/v1/agent/heartbeat", "", 405, "method_not_allowed"},
	{"job id traversal", "GET", "/v1/jobs/..%2f..%2fetc%2fpasswd", "", 404, "not_found"},
	{"job id NUL", "GET", "/v1/jobs/j%00x", "", 404, "not_found"},
	{"job id CR LF", "DELETE", "/v1/jobs/j%0d%0aSet-Cookie:x", "", 404, "not_found"},
	{"job id SQL", "DELETE", "/v1/jobs/%27%20OR%201=1--", "", 404, "not_found"},
	{"job id script", "GET", "/v1/jobs/%3Cscript%3Ealert(1)%3C%2Fscript%3E", "", 404, "not_found"},
	{"job id very long", "GET", "/v1/jobs/" + strings.Repeat("j", 4000), "", 404, "not_found"},
	{"deployment traversal", "GET", "/v1/deployments/..%2fsvc", "", 404, "not_found"},
	{"deployment ESC", "PATCH", "/v1/deployments/%1b%5b2J", `{"desired_replicas":1}`, 404, "not_found"},
	{"deployment delete unknown", "DELETE", "/v1/deployments/nope", "", 404, "not_found"},
	{"node unknown", "GET", "/v1/nodes/..%2fn1", "", 404, "not_found"},
	{"node action unknown", "POST", "/v1/nodes/n1/explode", "", 404, "not_found"},
	{"node action on no node", "POST", "/v1/nodes/n%00/drain", "", 404, "not_found"},
	{"quota unknown", "GET", "/v1/quotas/default/nobody", "", 404, "not_found"},
	{"alert unknown", "GET", "/v1/alerts/%27", "", 404, "not_found"},
	{"alert action unknown", "POST", "/v1/alerts/a-none/actions/explode", "", 404, "not_found"},
	{"token unknown", "DELETE", "/v1/tokens/t-nothing", "", 404, "not_found"},
	{"body over 1 MiB", "POST", "/v1/jobs", `{"name":"` + strings.Repeat("x", maxBody) + `","gpus":1,"topology":"any"}`, 413, "too_large"},
	{"heartbeat over 1 MiB", "POST", "/v1/agent/heartbeat", `{"node_id":"` + strings.Repeat("n", maxBody) + `"}`, 413, "too_large"},
}
