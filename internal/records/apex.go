package records

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// SOA timers of every zone we serve; the minimum (negative caching) TTL is Builder.NegativeTTL.
const (
	soaRefresh = 7200
	soaRetry   = 1800
	soaExpire  = 86400
	soaMaxTTL  = 300 // the SOA's own TTL, at most, as in the in-tree plugin
)

// dnsSchemaVersion is the version of the Kubernetes DNS specification served at dns-version.<zone>.
const dnsSchemaVersion = "1.1.0"

// Nameserver is one of the zone's nameservers: a name and one of its addresses.
type Nameserver struct {
	name string
	addr netip.Addr
}

// Nameservers are the nameservers of zone, as the in-tree plugin finds them: each of services (the
// services with one of this server's addresses, local, among their ready endpoints), by its cluster
// IPs (a headless service by its endpoints in the slices holding such an address, under their
// endpoint names); without such a service, this server's own addresses under ns.dns.<zone>.
func (b *Builder) Nameservers(zone string, services map[string]*object.Service, local []netip.Addr) []Nameserver {
	var out []Nameserver
	for _, key := range slices.Sorted(maps.Keys(services)) {
		s := services[key]
		name := s.Name + "." + s.Namespace + ".svc." + zone
		if s.Kind != object.Headless {
			for _, ip := range s.ClusterIPs {
				out = append(out, Nameserver{name, ip})
			}
			continue
		}
		for _, sl := range s.Slices {
			if sl.IndexOf(local) < 0 {
				continue
			}
			for i := range sl.Len() {
				e := sl.Endpoint(i)
				out = append(out, Nameserver{labelOf(e) + "." + name, e.Addr})
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, ip := range local {
		out = append(out, Nameserver{"ns.dns." + zone, ip})
	}
	return out
}

// ApexSet returns the SOA of zone with serial, and its NS records with their addresses as glue. A zone
// whose nameservers are not known yet names ns.dns.<zone>, without glue.
//
// The SOA's MINIMUM is the negative TTL. Its own TTL is the ttl where it is asked for (and
// transferred), and the negative TTL in NXDOMAIN and NODATA answers (NegativeSOA). A resolver
// caches a miss for the smaller of the SOA's TTL and MINIMUM (RFC 2308, section 5), CoreDNS's
// cache for the SOA's TTL alone: in a negative answer both are the negative TTL, whether it is
// longer or shorter than the ttl. Each TTL is at most soaMaxTTL. Without negative_ttl, the SOA
// and NegativeSOA are one record.
func (b *Builder) ApexSet(zone string, serial uint32, nss []Nameserver) *FixedSet {
	mname := "ns.dns." + zone
	if tree.IsReverseZone(zone) {
		mname = b.Nameserver
	}
	soa := &dns.SOA{
		Hdr: hdr(zone, dns.TypeSOA, min(b.TTL, soaMaxTTL)), Ns: mname, Mbox: "hostmaster." + zone,
		Serial: serial, Refresh: soaRefresh, Retry: soaRetry, Expire: soaExpire, Minttl: b.NegativeTTL,
	}
	s := &FixedSet{SOA: []dns.RR{soa}}
	s.NegativeSOA = s.SOA
	if ttl := min(b.NegativeTTL, soaMaxTTL); ttl != soa.Hdr.Ttl {
		negative := *soa
		negative.Hdr.Ttl = ttl
		s.NegativeSOA = []dns.RR{&negative}
	}
	for _, ns := range nss {
		if !slices.ContainsFunc(s.ns, func(rr dns.RR) bool { return rr.(*dns.NS).Ns == ns.name }) {
			s.ns = append(s.ns, &dns.NS{Hdr: hdr(zone, dns.TypeNS, b.TTL), Ns: ns.name})
		}
		s.Glue = appendAddr(s.Glue, typeOf(ns.addr), ns.name, ns.addr, b.TTL)
	}
	if len(s.ns) == 0 {
		s.ns = []dns.RR{&dns.NS{Hdr: hdr(zone, dns.TypeNS, b.TTL), Ns: mname}}
	}
	return s
}

// dnsVersionTTL is dns-version's TTL, 8 hours as in the in-tree plugin, not the ttl option: the
// schema version never changes while the server runs.
const dnsVersionTTL = 28800

// DNSVersion returns the dns-version.<zone> TXT record.
func (b *Builder) DNSVersion(zone string) *FixedSet {
	return &FixedSet{txt: []dns.RR{&dns.TXT{Hdr: hdr("dns-version."+zone, dns.TypeTXT, dnsVersionTTL), Txt: []string{dnsSchemaVersion}}}}
}

// NSAddresses returns the A and AAAA records of ns.dns.<zone>: the addresses of its
// nameservers, whatever their names.
func (b *Builder) NSAddresses(zone string, nss []Nameserver) *FixedSet {
	s := &FixedSet{nameserverAlias: true}
	name := "ns.dns." + zone
	for _, ns := range nss {
		if ns.addr.Is4() {
			s.a = appendAddr(s.a, dns.TypeA, name, ns.addr, b.TTL)
		} else {
			s.aaaa = appendAddr(s.aaaa, dns.TypeAAAA, name, ns.addr, b.TTL)
		}
	}
	return s
}
