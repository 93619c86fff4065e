package control

import (
	"hash/maphash"

	"github.com/berthsched/berth/internal/model"
	"github.com/berthsched/berth/internal/sched"
)

// pendingIndex finds a pass's pending entries, and a training job's
// place in the queue, by owner id.
//
// Written here rather than as a map because of what a map costs at
// fleet scale: a map[string]*Pending copies every id's string header
// into its slots, about 130 MB at 1M pending, and a second map for
// queue positions as much again; both were built anew every pass, and
// the last pass's and the one in flight were live together. The ids are
// already in the entries, so this table holds only entry numbers (open
// addressing, linear probing, at most half full) and compares the
// entry's own OwnerID: 16 MB at 1M pending, built in one pass over the
// entries.
type pendingIndex struct {
	entries []sched.Pending
	seed    maphash.Seed
	// slots holds an entry's index+1 (0: empty); pos, parallel to it, a
	// training job's place in the queue from 1 (0: none).
	slots, pos []int32
}

// newPendingIndex indexes entries the way the pass's readers need them:
// a training job by its last entry, a deployment by its first (the
// first names the replica it waits on); a training job's position is
// its first entry's place among the training entries, which the core
// appends in rank order.
func newPendingIndex(entries []sched.Pending) *pendingIndex {
	ix := &pendingIndex{entries: entries, seed: maphash.MakeSeed()}
	if len(entries) == 0 {
		return ix
	}
	n := 1
	for n < 2*len(entries) {
		n <<= 1
	}
	ix.slots, ix.pos = make([]int32, n), make([]int32, n)
	var queued int32
	for i := range entries {
		e := &entries[i]
		k := ix.find(e.OwnerID)
		training := e.Kind != model.OwnerInference
		switch {
		case ix.slots[k] == 0:
			ix.slots[k] = int32(i) + 1
		case training:
			ix.slots[k] = int32(i) + 1
		}
		if training && ix.pos[k] == 0 {
			queued++
			ix.pos[k] = queued
		}
	}
	return ix
}

// find returns id's slot, or the empty slot where it would go.
func (ix *pendingIndex) find(id string) int {
	mask := len(ix.slots) - 1
	k := int(maphash.String(ix.seed, id)) & mask
	for ix.slots[k] != 0 && ix.entries[ix.slots[k]-1].OwnerID != id {
		k = (k + 1) & mask
	}
	return k
}

// get returns id's entry, nil if the pass left it unmentioned.
func (ix *pendingIndex) get(id string) *sched.Pending {
	if len(ix.slots) == 0 {
		return nil
	}
	if e := ix.slots[ix.find(id)]; e != 0 {
		return &ix.entries[e-1]
	}
	return nil
}

// position returns a training job's place in the queue, from 1.
func (ix *pendingIndex) position(id string) (int, bool) {
	if len(ix.slots) == 0 {
		return 0, false
	}
	p := ix.pos[ix.find(id)]
	return int(p), p != 0
}
