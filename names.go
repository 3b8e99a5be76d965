package kubetree

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Names as the plugin handles them: zones and everything written into the tree are lower case and
// fully qualified; query names arrive in any case and are compared without allocating.

// matchZone returns the index of the longest of zones (lower case) that qname, in any case, is
// in; -1 if none. It does not allocate.
func matchZone(zones []string, qname string) int {
	best := -1
	for i, z := range zones {
		if best >= 0 && len(z) <= len(zones[best]) || len(z) > len(qname) {
			continue
		}
		off := len(qname) - len(z)
		if off > 0 && (qname[off-1] != '.' || escaped(qname, off-1)) {
			continue // a\.cluster.local. is in local., not cluster.local.
		}
		if equalFoldASCII(qname[off:], z) {
			best = i
		}
	}
	return best
}

// isReverseZone reports whether zone is an in-addr.arpa or ip6.arpa zone. (Not dnsutil.IsReverse:
// it does not count the bare in-addr.arpa. and ip6.arpa. zones.)
func isReverseZone(zone string) bool {
	return strings.HasSuffix(zone, "in-addr.arpa.") || strings.HasSuffix(zone, "ip6.arpa.")
}

// inZone reports whether name (lower case) is zone or below it.
func inZone(name, zone string) bool { return dns.IsSubDomain(zone, name) }

// labelsBelow returns the labels of name below zone, the one next to the apex first.
func labelsBelow(name, zone string) []string {
	labels := dns.SplitDomainName(name[:len(name)-len(zone)])
	slices.Reverse(labels)
	return labels
}

// escaped reports whether s[i] is escaped by the backslashes before it: the dot in a\.b is part of
// the label, the one in a\\.b ends it.
func escaped(s string, i int) bool {
	n := 0
	for i > n && s[i-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}

// equalFoldASCII reports whether a, in any case, equals b, which is lower case.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func lowerInto(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// splitRest splits the labels below a service ("a.b." at most, in the query's case); more says
// there were more than two.
func splitRest(rest string) (first, second string, more bool) {
	if rest == "" {
		return "", "", false
	}
	rest = rest[:len(rest)-1]
	first, rest, _ = strings.Cut(rest, ".")
	second, rest, _ = strings.Cut(rest, ".")
	return first, second, rest != ""
}

// podLabelAddress reads the address in a pod's name, <address with dashes>.<ns>.pod.<zone>, as the
// in-tree plugin does: three dashes and no double dash is IPv4, anything else IPv6. An IPv4-mapped
// IPv6 address is not one: it would be an IPv4 address answered as AAAA.
func podLabelAddress(label string) (netip.Addr, bool) {
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
