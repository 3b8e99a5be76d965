package object

import (
	"net/netip"
	"slices"
	"sync"
)

// PodIndex finds pods by address: who a client is (autopath, metadata) and whether a pod has an
// address (pods verified). The applier writes it; queries read it under the read lock.
type PodIndex struct {
	mu     sync.RWMutex
	byAddr map[netip.Addr]*StoredPod
	// more holds the other live pods of an address that more than one pod claims: hostNetwork
	// pods, or a pod whose address was given to a new pod before its own deletion arrived.
	more map[netip.Addr][]*StoredPod
}

// NewPodIndex returns an empty index.
func NewPodIndex() *PodIndex {
	return &PodIndex{byAddr: map[netip.Addr]*StoredPod{}, more: map[netip.Addr][]*StoredPod{}}
}

// Replace swaps a pod's addresses: old (nil for a new pod) for p (nil for a deleted one).
func (x *PodIndex) Replace(old, p *StoredPod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old != nil {
		for _, a := range old.addrs {
			x.removeOwner(a, old)
		}
	}
	if p != nil {
		for _, a := range p.addrs {
			x.addOwner(a, p)
		}
	}
}

func (x *PodIndex) addOwner(a netip.Addr, p *StoredPod) {
	if x.byAddr[a] == nil {
		x.byAddr[a] = p
		return
	}
	x.more[a] = append(x.more[a], p)
}

func (x *PodIndex) removeOwner(a netip.Addr, p *StoredPod) {
	rest := slices.DeleteFunc(slices.Clone(x.more[a]), func(o *StoredPod) bool { return o.key() == p.key() })
	if first := x.byAddr[a]; first != nil && first.key() == p.key() {
		if len(rest) == 0 {
			delete(x.byAddr, a)
			delete(x.more, a)
			return
		}
		x.byAddr[a], rest = rest[0], rest[1:]
	}
	if len(rest) == 0 {
		delete(x.more, a)
	} else {
		x.more[a] = rest
	}
}

// AnyAt reports whether match accepts a pod that has address a (pods verified asks for one of
// the query's namespace).
func (x *PodIndex) AnyAt(a netip.Addr, match func(*StoredPod) bool) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.byAddr[a]
	if p == nil {
		return false
	}
	return match(p) || slices.ContainsFunc(x.more[a], match)
}

// ClientAt returns the pod that has address a, when exactly one pod that is not on the host's
// network has it: an address two pods claim identifies neither.
func (x *PodIndex) ClientAt(a netip.Addr) *StoredPod {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.byAddr[a]
	if p == nil || p.hostNetwork || len(x.more[a]) > 0 {
		return nil
	}
	return p
}

// PodsIn counts the pods off the host's network that have an address in p, and names one of them
// (namespace/name at address): client_subnet_from must not trust a network pods send from.
func (x *PodIndex) PodsIn(p netip.Prefix) (n int, example string) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for a, first := range x.byAddr {
		if !p.Contains(a) {
			continue
		}
		for _, pod := range append([]*StoredPod{first}, x.more[a]...) {
			if pod.hostNetwork {
				continue
			}
			if n == 0 || pod.key()+" at "+a.String() < example {
				example = pod.key() + " at " + a.String()
			}
			n++
		}
	}
	return n, example
}

// sizes are the index's entry counts (addresses, addresses with several pods), for tests that
// check removal.
func (x *PodIndex) sizes() [2]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return [2]int{len(x.byAddr), len(x.more)}
}
