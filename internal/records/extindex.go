package records

import (
	"net/netip"
	"slices"
	"sync"
)

// ExternalIndex finds the services that have an external IP, for kubetree_external's PTR records
// (as the in-tree plugin's external IP index does for k8s_external). Only services with external
// IPs are in it. The applier writes it, one service at a time; an address's list is replaced,
// never changed in place, so a reader may keep what it got.
type ExternalIndex struct {
	mu     sync.RWMutex
	owners map[netip.Addr][]string // address -> "<svc>.<ns>" of each service with it, sorted
}

// NewExternalIndex returns an empty index.
func NewExternalIndex() *ExternalIndex {
	return &ExternalIndex{owners: map[netip.Addr][]string{}}
}

// Replace moves the service named owner ("<svc>.<ns>") from the external IPs of old to those of
// now (either may be nil).
func (x *ExternalIndex) Replace(owner string, old, now *ServiceSet) {
	before, after := externalIPs(old), externalIPs(now)
	if len(before) == 0 && len(after) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ip := range before {
		if slices.Contains(after, ip) {
			continue
		}
		list := slices.DeleteFunc(slices.Clone(x.owners[ip]), func(o string) bool { return o == owner })
		if len(list) == 0 {
			delete(x.owners, ip)
		} else {
			x.owners[ip] = list
		}
	}
	for _, ip := range after {
		if list := x.owners[ip]; !slices.Contains(list, owner) {
			list = append(slices.Clone(list), owner)
			slices.Sort(list)
			x.owners[ip] = list
		}
	}
}

// ServicesAt returns the services with the external IP addr.
func (x *ExternalIndex) ServicesAt(addr netip.Addr) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.owners[addr]
}

// externalIPs are the distinct external IPs of a service's record set.
func externalIPs(r *ServiceSet) []netip.Addr {
	if r == nil {
		return nil
	}
	var ips []netip.Addr
	for _, e := range r.externals() {
		if e.Host == "" && !slices.Contains(ips, e.Addr) {
			ips = append(ips, e.Addr)
		}
	}
	return ips
}

// Size counts the addresses in the index, for tests that check removal.
func (x *ExternalIndex) Size() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.owners)
}
