package model

import "fmt"

// Topology is the declared connectivity a request needs. It is a
// constraint, never a hint (§3): a `node` request that cannot sit inside one
// NVLink domain is not placed at all.
type Topology string

const (
	// TopologyNode puts all of a request's GPUs inside one node (one NVLink domain).
	TopologyNode Topology = "node"
	// TopologyPod keeps a request inside one pod (one leaf switch).
	TopologyPod Topology = "pod"
	// TopologyAny lets a request span pods.
	TopologyAny Topology = "any"
)

// Topologies lists the valid values, narrowest first.
var Topologies = []Topology{TopologyNode, TopologyPod, TopologyAny}

// ParseTopology validates a topology name.
func ParseTopology(s string) (Topology, error) {
	switch t := Topology(s); t {
	case TopologyNode, TopologyPod, TopologyAny:
		return t, nil
	}
	return "", fmt.Errorf("topology: %q is not one of node, pod, any", s)
}
