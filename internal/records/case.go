package records

import (
	"strings"

	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// Names in the query's case. The in-tree plugin writes the zone of every name it makes as the
// question wrote it: `_http._tcp.web.prod.svc.Cluster.Local. SRV` targets
// `web.prod.svc.Cluster.Local.`, and a negative answer's SOA names `ns.dns.Cluster.Local.` and
// `hostmaster.Cluster.Local.`; the labels above the zone are written as stored (lower case).
// Records are built in lower case, so a question whose zone is in lower case, nearly every one,
// gets them as built, without a copy.

// ZoneAsAsked is zone as qname, a name in it, writes it.
func ZoneAsAsked(qname, zone string) string { return qname[len(qname)-len(zone):] }

// InZone is name with zone, in which it is (in lower case), written as asked; a name outside
// zone is returned as it is.
func InZone(name, zone, asked string) string {
	if asked == zone || !strings.HasSuffix(name, zone) || len(name) > len(zone) && name[len(name)-len(zone)-1] != '.' {
		return name
	}
	return name[:len(name)-len(zone)] + asked
}

// WriteZoneAsAsked writes zone as asked in the owner names of rrs and the names their data holds
// (an SOA's nameserver and mailbox, an NS record's nameserver). rrs are the caller's copies.
func WriteZoneAsAsked(rrs []dns.RR, zone, asked string) {
	if asked == zone {
		return
	}
	for _, rr := range rrs {
		h := rr.Header()
		h.Name = InZone(h.Name, zone, asked)
		switch x := rr.(type) {
		case *dns.SOA:
			x.Ns, x.Mbox = InZone(x.Ns, zone, asked), InZone(x.Mbox, zone, asked)
		case *dns.NS:
			x.Ns = InZone(x.Ns, zone, asked)
		}
	}
}

// nameAsAsked is the service's name with its zone as owner, the service's name or one below it,
// writes it: what SRV records target, as the in-tree plugin writes them. A name written otherwise
// (an escape in the zone) gets the service's name as built.
func (r *ServiceSet) nameAsAsked(owner string) string {
	if strings.HasSuffix(owner, r.name) {
		return r.name // the zone in lower case: as built
	}
	at := 0 // the zone follows <svc>.<ns>.svc., whose labels have no dots
	for range 3 {
		at += strings.IndexByte(r.name[at:], '.') + 1
	}
	zone := r.name[at:]
	if len(owner) < len(zone) || !tree.EqualFold(ZoneAsAsked(owner, zone), zone) {
		return r.name
	}
	return r.name[:at] + ZoneAsAsked(owner, zone)
}
