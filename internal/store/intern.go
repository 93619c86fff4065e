package store

import (
	"unique"

	"github.com/berthsched/berth/internal/model"
)

// internJob makes the strings a decoded job shares with many others (its
// org, team, user, owner, state, topology, GPU models, event names, image
// and command) the one canonical copy of each: JSON decoding allocates a
// fresh copy of every string, and a million jobs of a few teams kept a
// million copies of "pending" and of each team's name. unique is the
// standard library's interning: safe for concurrent use, and its table
// holds its entries weakly, so names no job uses any more are collected.
// Weakly means a canonical copy is dropped from the table at a
// collection once no handle to it is left (the jobs keep its bytes), and
// the next decode makes a new one: a common string has a copy per
// collection cycle, a few hundred over a million submits, not one per
// job. Keeping handles would pin every image and command ever seen,
// which a tenant could grow without bound. Ids, names and details stay
// as decoded: they are the job's own.
func internJob(j *model.Job) {
	in := func(s *string) {
		if *s != "" {
			*s = unique.Make(*s).Value()
		}
	}
	for _, s := range []*string{&j.Org, &j.Team, &j.User, &j.Owner, &j.Shape.MIGProfile} {
		in(s)
	}
	j.State = model.JobState(unique.Make(string(j.State)).Value())
	j.Shape.Topology = model.Topology(unique.Make(string(j.Shape.Topology)).Value())
	for i := range j.Shape.Models {
		in(&j.Shape.Models[i])
	}
	for i := range j.History {
		in(&j.History[i].Event)
	}
	if r := j.RunRecord; r != nil { // decoded for this job alone
		for i := range r.Ran {
			in(&r.Ran[i].NodeID)
		}
	}
	if w := j.Workload; w != nil {
		in(&w.Image)
		for i := range w.Command {
			in(&w.Command[i])
		}
	}
}
