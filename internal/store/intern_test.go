package store

import (
	"runtime"
	"testing"
	"unique"
	"unsafe"

	"github.com/berthsched/berth/internal/model"
)

// Two decoded jobs of one team share one copy of each name they have in
// common, and keep their own ids and names.
func TestDecodedJobsShareTheirCommonStrings(t *testing.T) {
	dec := func(b string) *model.Job {
		t.Helper()
		o, err := decode(Jobs, []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		return o.(*model.Job)
	}
	body := func(id string) string {
		return `{"id":"` + id + `","name":"` + id + `-run","org":"ml","team":"vision","user":"ana","owner":"team:vision","state":"pending",` +
			`"shape":{"gpus":8,"topology":"node","models":["H100"]},"history":[{"at":"2030-01-01T00:00:00Z","event":"submitted"}],` +
			`"workload":{"image":"train:1","command":["python","train.py"]}}`
	}
	// The test holds a handle to each common string, as the jobs of a
	// busy table do in effect: a collection between the two decodes
	// would otherwise drop the canonical copy (see internJob).
	var hold []unique.Handle[string]
	for _, s := range []string{"ml", "vision", "ana", "team:vision", "pending", "node", "H100", "submitted", "train:1", "train.py"} {
		hold = append(hold, unique.Make(s))
	}
	a, b := dec(body("j-1")), dec(body("j-2"))
	runtime.KeepAlive(hold)
	same := func(what, x, y string) {
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	same("org", a.Org, b.Org)
	same("team", a.Team, b.Team)
	same("user", a.User, b.User)
	same("owner", a.Owner, b.Owner)
	same("state", string(a.State), string(b.State))
	same("topology", string(a.Shape.Topology), string(b.Shape.Topology))
	same("models", a.Shape.Models[0], b.Shape.Models[0])
	same("event", a.History[0].Event, b.History[0].Event)
	same("image", a.Workload.Image, b.Workload.Image)
	same("command", a.Workload.Command[1], b.Workload.Command[1])
	if a.ID != "j-1" || b.ID != "j-2" || a.Name != "j-1-run" || b.Name != "j-2-run" {
		t.Errorf("ids and names: %q %q %q %q", a.ID, b.ID, a.Name, b.Name)
	}
}
