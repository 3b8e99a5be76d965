package kubetree

import (
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// reverseIndex knows which services own a PTR name, since an endpoint address may back several
// services. Only the watcher's single worker uses it.
type reverseIndex struct {
	owners    map[netip.Addr]map[string][]ptrTarget // address -> service key -> its targets
	byService map[string][]netip.Addr
}

func newReverseIndex() *reverseIndex {
	return &reverseIndex{owners: map[netip.Addr]map[string][]ptrTarget{}, byService: map[string][]netip.Addr{}}
}

// update records that the service key now owns targets, and returns every address whose PTR
// answer may have changed.
func (x *reverseIndex) update(key string, targets []ptrTarget) []netip.Addr {
	changed := x.byService[key]
	for _, addr := range changed {
		delete(x.owners[addr], key)
		if len(x.owners[addr]) == 0 {
			delete(x.owners, addr)
		}
	}
	var addrs []netip.Addr
	for _, t := range targets {
		byKey := x.owners[t.Addr]
		if byKey == nil {
			byKey = map[string][]ptrTarget{}
			x.owners[t.Addr] = byKey
		}
		if len(byKey[key]) == 0 {
			addrs = append(addrs, t.Addr)
		}
		byKey[key] = append(byKey[key], t)
	}
	if len(addrs) == 0 {
		delete(x.byService, key)
	} else {
		x.byService[key] = addrs
	}
	return append(changed, addrs...)
}

// records returns the PTR answer for addr: the service whose cluster IP it is, else every endpoint
// name with that address, in a stable order.
func (x *reverseIndex) records(addr netip.Addr, owner string, ttl uint32) *RRSets {
	var clusterIPs, endpoints []string
	for _, targets := range x.owners[addr] {
		for _, t := range targets {
			if t.ClusterIP {
				clusterIPs = append(clusterIPs, t.Name)
			} else {
				endpoints = append(endpoints, t.Name)
			}
		}
	}
	names := endpoints
	if len(clusterIPs) > 0 {
		names = clusterIPs
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	rrs := &RRSets{PTR: make([]dns.RR, 0, len(names))}
	for _, n := range names {
		rrs.PTR = append(rrs.PTR, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, ttl), Ptr: n})
	}
	return rrs
}

// reverseName is the in-addr.arpa or ip6.arpa name of addr.
func reverseName(addr netip.Addr) string {
	name, _ := dns.ReverseAddr(addr.String())
	return name
}
