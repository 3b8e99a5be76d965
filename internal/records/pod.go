package records

import (
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// PodAddress returns the record of a pod's address, owned by owner, when qtype asks for its family.
func (b *Builder) PodAddress(owner string, addr netip.Addr, qtype uint16) []dns.RR {
	switch {
	case addr.Is4() && qtype == dns.TypeA:
		return []dns.RR{&dns.A{Hdr: hdr(owner, dns.TypeA, b.TTL), A: addr.AsSlice()}}
	case addr.Is6() && qtype == dns.TypeAAAA:
		return []dns.RR{&dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, b.TTL), AAAA: addr.AsSlice()}}
	}
	return nil
}

// PodLabelAddress reads the address in a pod's name, <address with dashes>.<ns>.pod.<zone>, as the
// in-tree plugin does: three dashes and no double dash is IPv4, anything else IPv6. An IPv4-mapped
// IPv6 address is not one: it would be an IPv4 address answered as AAAA.
func PodLabelAddress(label string) (netip.Addr, bool) {
	var text string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		text = strings.ReplaceAll(label, "-", ".")
	} else {
		text = strings.ReplaceAll(label, "-", ":")
	}
	ip := net.ParseIP(text)
	if ip == nil || (strings.Contains(text, ":") && ip.To4() != nil) {
		return netip.Addr{}, false
	}
	if v4 := ip.To4(); v4 != nil {
		return netip.AddrFrom4([4]byte(v4)), true
	}
	return netip.AddrFrom16([16]byte(ip)), true
}
