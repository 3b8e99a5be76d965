package object

import (
	"sync"

	api "k8s.io/api/core/v1"
)

// With topology, the zone of a client pod's node: nodes are watched, and of each only its name and
// its topology.kubernetes.io/zone label are kept.

// StoredNode is what the node informer keeps of a Node.
type StoredNode struct {
	Meta
	zone string // the topology.kubernetes.io/zone label; "" without it
}

// SlimNode is the node informer's transform.
func SlimNode(obj any) (any, error) {
	n, ok := obj.(*api.Node)
	if !ok {
		return obj, nil // a tombstone (deletes go by key), or already slim
	}
	return &StoredNode{Meta: metaOf(&n.ObjectMeta), zone: n.Labels[api.LabelTopologyZone]}, nil
}

// NodeDiffers reports whether two versions of a node differ in what the index keeps.
func NodeDiffers(old, new any) bool {
	a, ok1 := old.(*StoredNode)
	b, ok2 := new.(*StoredNode)
	return !ok1 || !ok2 || a.zone != b.zone
}

// NodeIndex is the zone of each node, for the queries of client pods. The applier writes it;
// queries read it under the read lock.
type NodeIndex struct {
	mu    sync.RWMutex
	zones map[string]string
}

// NewNodeIndex returns an empty index.
func NewNodeIndex() *NodeIndex { return &NodeIndex{zones: map[string]string{}} }

// Replace puts a node's zone in the index, or takes the node out (n nil) by name.
func (x *NodeIndex) Replace(name string, n *StoredNode) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n == nil {
		delete(x.zones, name)
		return
	}
	x.zones[name] = n.zone
}

// Zone is the zone of the named node; "" for a node without the label, or unknown.
func (x *NodeIndex) Zone(name string) string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.zones[name]
}

// Len is the number of nodes held, for tests that check removal.
func (x *NodeIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.zones)
}
