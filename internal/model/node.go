package model

import (
	"fmt"
	"slices"
	"time"
)

// Health is a node's hardware health as its agent last reported it.
type Health string

const (
	HealthHealthy   Health = "healthy"
	HealthUnhealthy Health = "unhealthy"
	// HealthSuspect marks a node that missed heartbeats but is not yet lost.
	HealthSuspect Health = "suspect"
	HealthLost    Health = "lost"
)

// Node is one machine: one NVLink domain of GPUs, in one pod (leaf switch),
// in one pool. Identity is (ID, BootEpoch) (R5): a node that comes back with
// a new epoch is not the machine its allocations were made on.
type Node struct {
	ID        string `json:"id"`
	Pod       string `json:"pod"`
	Pool      string `json:"pool,omitempty"`
	Model     string `json:"model"` // GPU model, e.g. H100, A100, T4
	GPUs      int    `json:"gpus"`
	CPUMilli  int64  `json:"cpu_milli"`
	MemoryMiB int64  `json:"memory_mib"`

	Health      Health `json:"health"`
	Draining    bool   `json:"draining,omitempty"`
	Quarantined bool   `json:"quarantined,omitempty"`
	// QuarantinedGPUs fences single faulty GPUs (§8) while the rest of the
	// node keeps working.
	QuarantinedGPUs GPUMask `json:"quarantined_gpus,omitempty"`
	BootEpoch       uint64  `json:"boot_epoch"`
	// BootID and NodeUUID complete the identity (R5): the kernel's id of
	// this boot, and the id the agent created in its state directory. A
	// change of any of the three invalidates every allocation here.
	BootID   string `json:"boot_id,omitempty"`
	NodeUUID string `json:"node_uuid,omitempty"`
	// IdentityChange says when the identity last changed and how
	// (node_replaced, node_rebooted), for `berth nodes` and the dashboard.
	IdentityChange *IdentityChange `json:"identity_change,omitempty"`

	// Links is the optional NVLink matrix for nodes whose GPUs are not
	// all-to-all. Nil means every pair is equally well connected.
	Links *LinkMatrix `json:"links,omitempty"`
	// MIG is, per GPU, the size in milli of each MIG instance the
	// operator partitioned it into (an instance of k slices holds k/7 of
	// the GPU: 3g is 428); empty for a GPU not in MIG mode. A share on
	// such a GPU runs alone on one instance, so it fits only where a free
	// instance holds it. The agent reports it.
	MIG [][]int `json:"mig,omitempty"`
	// MIGProfiles names each instance of MIG ("3g.40gb"), in the same
	// order; empty when the node does not say. A share that asks for a
	// profile (Shape.MIGProfile) fits only an instance of that name:
	// Kubernetes' device plugin hands out MIG devices by profile, and a
	// 4g instance does not serve a pod that asked for a 3g one.
	MIGProfiles [][]string `json:"mig_profiles,omitempty"`
}

// Clone is a deep copy of the node: nothing it holds is shared with n.
func (n Node) Clone() Node {
	c := n
	if n.IdentityChange != nil {
		ic := *n.IdentityChange
		c.IdentityChange = &ic
	}
	if n.Links != nil {
		c.Links = &LinkMatrix{Links: cloneRows(n.Links.Links)}
	}
	c.MIG = cloneRows(n.MIG)
	c.MIGProfiles = cloneRows(n.MIGProfiles)
	return c
}

func cloneRows[T any](rows [][]T) [][]T {
	if rows == nil {
		return nil
	}
	out := make([][]T, len(rows))
	for i, r := range rows {
		out[i] = slices.Clone(r)
	}
	return out
}

// MIGProfile is the profile of instance k (from 0) of GPU g, "" when the
// node names none.
func (n *Node) MIGProfile(g, k int) string {
	if g < len(n.MIGProfiles) && k < len(n.MIGProfiles[g]) {
		return n.MIGProfiles[g][k]
	}
	return ""
}

// Partitioned reports whether GPU g is in MIG mode with instances.
func (n *Node) Partitioned(g int) bool { return g < len(n.MIG) && len(n.MIG[g]) > 0 }

// Schedulable reports whether the node may receive new placements at all.
// Quarantined, draining and unhealthy nodes never do.
func (n *Node) Schedulable() bool {
	return !n.Quarantined && !n.Draining && (n.Health == HealthHealthy || n.Health == "")
}

// Validate checks the node's fields and names the first one that is wrong.
func (n *Node) Validate() error {
	switch {
	case n.ID == "":
		return fmt.Errorf("node: id: must not be empty")
	case n.GPUs < 1 || n.GPUs > MaxGPUsPerNode:
		return fmt.Errorf("node %s: gpus: %d is not between 1 and %d", n.ID, n.GPUs, MaxGPUsPerNode)
	case n.CPUMilli < 0:
		return fmt.Errorf("node %s: cpu_milli: %d must not be negative", n.ID, n.CPUMilli)
	case n.MemoryMiB < 0:
		return fmt.Errorf("node %s: memory_mib: %d must not be negative", n.ID, n.MemoryMiB)
	case n.QuarantinedGPUs&^FullMask(n.GPUs) != 0:
		return fmt.Errorf("node %s: quarantined_gpus: %s names GPUs beyond the node's %d", n.ID, n.QuarantinedGPUs, n.GPUs)
	}
	switch n.Health {
	case "", HealthHealthy, HealthUnhealthy, HealthSuspect, HealthLost:
	default:
		return fmt.Errorf("node %s: health: %q is not one of healthy, unhealthy, suspect, lost", n.ID, n.Health)
	}
	if n.Links != nil {
		if err := n.Links.validate(n.GPUs); err != nil {
			return fmt.Errorf("node %s: links: %w", n.ID, err)
		}
	}
	if err := validateMIG(n.MIG, n.GPUs); err != nil {
		return fmt.Errorf("node %s: %w", n.ID, err)
	}
	for g, names := range n.MIGProfiles {
		if len(names) > 0 && (g >= len(n.MIG) || len(names) != len(n.MIG[g])) {
			have := 0
			if g < len(n.MIG) {
				have = len(n.MIG[g])
			}
			return fmt.Errorf("node %s: mig_profiles: [%d]: %d names for the GPU's %d MIG instances: expected one per instance", n.ID, g, len(names), have)
		}
	}
	return nil
}

// validateMIG checks a MIG layout against a node's GPU count: at most one
// entry per GPU, instances of 1 to 1000 milli, and no GPU holding more
// than one GPU's worth.
func validateMIG(mig [][]int, gpus int) error {
	if len(mig) > gpus {
		return fmt.Errorf("mig: %d GPUs listed, the node has %d", len(mig), gpus)
	}
	for g, inst := range mig {
		sum := 0
		for k, m := range inst {
			if m < 1 || m > 1000 {
				return fmt.Errorf("mig: [%d][%d]: %d milli is not between 1 and 1000", g, k, m)
			}
			sum += m
		}
		if sum > 1000 {
			return fmt.Errorf("mig: [%d]: instances of %v milli add up to %d, more than one GPU (1000)", g, inst, sum)
		}
	}
	return nil
}

// LinkMatrix holds, for each GPU pair, the number of NVLink links between
// them (0 = traffic crosses PCIe or the host). It is symmetric.
type LinkMatrix struct {
	Links [][]int `json:"links"`
}

// Between returns the link count between GPUs a and b.
func (l *LinkMatrix) Between(a, b int) int { return l.Links[a][b] }

func (l *LinkMatrix) validate(gpus int) error {
	if len(l.Links) != gpus {
		return fmt.Errorf("has %d rows, want one per GPU (%d)", len(l.Links), gpus)
	}
	// Every row's length first: the symmetry check reads across rows.
	for i, row := range l.Links {
		if len(row) != gpus {
			return fmt.Errorf("row %d has %d entries, want %d", i, len(row), gpus)
		}
	}
	for i, row := range l.Links {
		for j, v := range row {
			if v < 0 {
				return fmt.Errorf("[%d][%d] = %d must not be negative", i, j, v)
			}
			if l.Links[j][i] != v {
				return fmt.Errorf("[%d][%d] = %d but [%d][%d] = %d: the matrix must be symmetric", i, j, v, j, i, l.Links[j][i])
			}
		}
	}
	return nil
}

// IdentityChange is the last time a node came back as a different
// incarnation, and which part of its identity changed.
type IdentityChange struct {
	Reason string    `json:"reason"` // node_replaced, node_rebooted
	At     time.Time `json:"at"`
	// Invalidated is how many allocations the change ended.
	Invalidated int `json:"invalidated"`
}
