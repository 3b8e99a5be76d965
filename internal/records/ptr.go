package records

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// Reverse names: reading in-addr.arpa and ip6.arpa names, the reverse zones an address's name
// falls in, and the PTR records of an address's owners.

// ptrNames returns the names an address points at: the service whose cluster IP it is, else every
// endpoint name with that address, sorted and without repeats.
func ptrNames(owners PTROwners) []string {
	var clusterIPs, endpoints []string
	for _, o := range append([]ptrOwner{owners.first}, owners.more...) {
		if o.at == clusterIPAt {
			clusterIPs = append(clusterIPs, o.svc.name)
			continue
		}
		e := o.svc.endpointAt(o.at)
		endpoints = append(endpoints, labelOf(e)+"."+o.svc.name)
	}
	names := endpoints
	if len(clusterIPs) > 0 {
		names = clusterIPs
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ParseReverse reads an in-addr.arpa or ip6.arpa name, in any case, into the address it names and
// how many leading bits of it the name gives (32 or 128 for a whole address). It does not allocate.
func ParseReverse(name string) (ip netip.Addr, bits int, ok bool) {
	lower := func(suffix string) bool {
		return len(name) >= len(suffix) && tree.EqualFold(name[len(name)-len(suffix):], suffix)
	}
	switch {
	case lower(".in-addr.arpa."):
		return parseReverse4(name[:len(name)-len(".in-addr.arpa.")])
	case lower(".ip6.arpa."):
		return parseReverse6(name[:len(name)-len(".ip6.arpa.")])
	}
	return netip.Addr{}, 0, false
}

func parseReverse4(labels string) (netip.Addr, int, bool) {
	var octets [4]byte
	n := 0
	for end := len(labels); end > 0; n++ {
		start := strings.LastIndexByte(labels[:end], '.') + 1
		label := labels[start:end]
		if n == 4 || label == "" || len(label) > 3 || (len(label) > 1 && label[0] == '0') {
			return netip.Addr{}, 0, false
		}
		v := 0
		for i := 0; i < len(label); i++ {
			if label[i] < '0' || label[i] > '9' {
				return netip.Addr{}, 0, false
			}
			v = v*10 + int(label[i]-'0')
		}
		if v > 255 {
			return netip.Addr{}, 0, false
		}
		octets[n] = byte(v)
		end = start - 1
	}
	return netip.AddrFrom4(octets), 8 * n, true
}

func parseReverse6(labels string) (netip.Addr, int, bool) {
	var b [16]byte
	n := 0
	for end := len(labels); end > 0; n++ {
		start := end - 1
		if n == 32 || (start > 0 && labels[start-1] != '.') {
			return netip.Addr{}, 0, false
		}
		v, ok := hexNibble(labels[start])
		if !ok {
			return netip.Addr{}, 0, false
		}
		if n%2 == 0 {
			b[n/2] = v << 4
		} else {
			b[n/2] |= v
		}
		end = start - 1
	}
	return netip.AddrFrom16(b), 4 * n, true
}

func hexNibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// reversePrefix is the address range a reverse zone covers; ok is false for a forward zone.
func reversePrefix(zone string) (netip.Prefix, bool) {
	switch zone {
	case "in-addr.arpa.":
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
	case "ip6.arpa.":
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
	}
	ip, bits, ok := ParseReverse(zone)
	if !ok {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(ip, bits), true
}

// PTR returns the PTR records of an address's owners, owned by owner.
func (b *Builder) PTR(owner string, owners PTROwners) []dns.RR {
	return b.PTRRecords(owner, ptrNames(owners))
}

// PTRRecords returns PTR records owned by owner that point at names.
func (b *Builder) PTRRecords(owner string, names []string) []dns.RR {
	out := make([]dns.RR, 0, len(names))
	for _, name := range names {
		out = append(out, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, b.TTL), Ptr: name})
	}
	return out
}

// endpointAt returns the endpoint address at position at, counted across the slices, as the
// reverse index counts them.
func (r *ServiceSet) endpointAt(at uint32) object.Endpoint {
	i := int(at)
	for _, sl := range r.slices {
		if i < sl.Len() {
			return sl.Endpoint(i)
		}
		i -= sl.Len()
	}
	panic("kubetree: PTR entry past its service's endpoints")
}

// reverseZone is a reverse zone we serve, with its address range.
type reverseZone struct {
	name   string
	prefix netip.Prefix
}

// ReverseZones are the reverse zones of a server block, with their address ranges.
type ReverseZones []reverseZone

// ReverseZonesOf returns the reverse zones among zones.
func ReverseZonesOf(zones []string) ReverseZones {
	var out ReverseZones
	for _, z := range zones {
		if p, ok := reversePrefix(z); ok && tree.IsReverseZone(z) {
			out = append(out, reverseZone{z, p})
		}
	}
	return out
}

// ZoneOf returns the longest reverse zone that holds addr's name, or "".
func (l ReverseZones) ZoneOf(addr netip.Addr) string {
	best, bits := "", -1
	for _, z := range l {
		if z.prefix.Contains(addr) && z.prefix.Bits() > bits {
			best, bits = z.name, z.prefix.Bits()
		}
	}
	return best
}

// ReverseName is addr's name in in-addr.arpa or ip6.arpa.
func ReverseName(addr netip.Addr) string {
	name, _ := dns.ReverseAddr(addr.String())
	return name
}
