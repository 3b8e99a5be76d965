package kubetree

import (
	"context"
	"net"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

// upstreamer resolves names outside our zones through the rest of the server's chain; CoreDNS's
// upstream package in production, a stand-in in tests.
type upstreamer interface {
	Lookup(ctx context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error)
}

// maxChase bounds how many ExternalName services pointing at each other one answer follows.
const maxChase = 8

// answer replies to a query for a name in zone.
func (k *Kubetree) answer(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, zone string) (int, error) {
	q := r.Question[0]
	switch {
	case q.Qclass != dns.ClassINET:
		return dns.RcodeRefused, nil
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		// No zone transfer: it would enumerate every service in the cluster.
		return dns.RcodeRefused, nil
	}

	rrs, exists := k.tree.Lookup(q.Name, zone)
	if !exists && k.cfg.podMode == podModeInsecure {
		rrs, exists = k.podRecords(q.Name, zone)
	}
	if !exists {
		if !k.synced.Load() {
			// Not synced: we do not know the name is absent, and a client would cache an NXDOMAIN.
			return k.negative(w, r, zone, dns.RcodeServerFailure)
		}
		if k.Fall.Through(q.Name) {
			return plugin.NextOrFailure(k.Name(), k.Next, ctx, w, r)
		}
		return k.negative(w, r, zone, dns.RcodeNameError)
	}
	if rrs == nil || q.Qtype == dns.TypeANY {
		// ANY reveals nothing, not even an ExternalName's CNAME, and is not sent upstream.
		return k.negative(w, r, zone, dns.RcodeSuccess)
	}

	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(rrs.CNAME) > 0 && q.Qtype != dns.TypeCNAME {
		k.chase(ctx, w, r, m, rrs.CNAME, q.Name, q.Qtype)
	} else {
		m.Answer = appendCopies(m.Answer, pick(rrs, q.Qtype), q.Name)
		if q.Qtype == dns.TypeSRV {
			m.Extra = appendCopies(m.Extra, rrs.Extra, "")
		}
	}
	if len(m.Answer) == 0 {
		return k.negative(w, r, zone, dns.RcodeSuccess)
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// pick returns the records of one type at a name; ANY gets none, so that it reveals nothing.
func pick(rrs *RRSets, qtype uint16) []dns.RR {
	switch qtype {
	case dns.TypeA:
		return rrs.A
	case dns.TypeAAAA:
		return rrs.AAAA
	case dns.TypeSRV:
		return rrs.SRV
	case dns.TypeCNAME:
		return rrs.CNAME
	case dns.TypePTR:
		return rrs.PTR
	case dns.TypeTXT:
		return rrs.TXT
	case dns.TypeNS:
		return rrs.NS
	case dns.TypeSOA:
		return rrs.SOA
	}
	return nil
}

// chase answers with the CNAME of an ExternalName service and then the target's records: from the
// tree when the target is in a zone we serve, otherwise through the rest of the server's chain.
func (k *Kubetree) chase(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, reply *dns.Msg, cname []dns.RR, owner string, qtype uint16) {
	for range maxChase {
		reply.Answer = appendCopies(reply.Answer, cname, owner)
		target := cname[0].(*dns.CNAME).Target
		zone := matchZone(k.Zones, target)
		if zone == "" {
			if k.upstream == nil {
				return
			}
			state := request.Request{W: w, Req: r}
			m, err := k.upstream.Lookup(ctx, state, target, qtype)
			if err != nil || m == nil {
				log.Debugf("resolving %s for an ExternalName service: %v", target, err)
				return
			}
			reply.Answer = append(reply.Answer, m.Answer...)
			return
		}
		rrs, _ := k.tree.Lookup(target, zone)
		if rrs == nil {
			return
		}
		if len(rrs.CNAME) == 0 || qtype == dns.TypeCNAME {
			// The target's owner: SRV records are stored without one.
			reply.Answer = appendCopies(reply.Answer, pick(rrs, qtype), target)
			if qtype == dns.TypeSRV {
				reply.Extra = appendCopies(reply.Extra, rrs.Extra, "")
			}
			return
		}
		cname, owner = rrs.CNAME, ""
	}
}

// negative writes NXDOMAIN, NODATA (rcode success) or SERVFAIL with the zone's SOA.
func (k *Kubetree) negative(w dns.ResponseWriter, r *dns.Msg, zone string, rcode int) (int, error) {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	qname := r.Question[0].Name
	if apex, _ := k.tree.Lookup(zone, zone); apex != nil {
		m.Ns = appendCopies(m.Ns, apex.SOA, qname[len(qname)-len(zone):])
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// podRecords answers a-b-c-d.<ns>.pod.<zone> under pods insecure: the address is in the name, and
// the namespace must exist.
func (k *Kubetree) podRecords(qname, zone string) (*RRSets, bool) {
	rel := qname[:len(qname)-len(zone)]
	dot := strings.IndexByte(rel, '.')
	if dot <= 0 || !strings.HasSuffix(strings.ToLower(rel), ".pod.") {
		return nil, false
	}
	if ns, ok := k.tree.Lookup(qname[dot+1:], zone); !ok || ns != nil || strings.Count(rel, ".") != 3 {
		return nil, false
	}
	host := rel[:dot]
	var text string
	if strings.Count(host, "-") == 3 && !strings.Contains(host, "--") {
		text = strings.ReplaceAll(host, "-", ".")
	} else {
		text = strings.ReplaceAll(host, "-", ":")
	}
	ip := net.ParseIP(text)
	if ip == nil {
		return nil, false
	}
	rrs := &RRSets{}
	if v4 := ip.To4(); v4 != nil && strings.Contains(text, ".") {
		rrs.A = []dns.RR{&dns.A{Hdr: hdr(qname, dns.TypeA, k.cfg.ttl), A: v4}}
	} else {
		rrs.AAAA = []dns.RR{&dns.AAAA{Hdr: hdr(qname, dns.TypeAAAA, k.cfg.ttl), AAAA: ip}}
	}
	return rrs, true
}

// appendCopies appends copies of src to dst, renamed to owner unless owner is "". The tree's records
// are never handed out: later plugins reorder and rename what they get. Address bytes are shared,
// since no plugin writes into them.
func appendCopies(dst, src []dns.RR, owner string) []dns.RR {
	for _, rr := range src {
		var c dns.RR
		switch v := rr.(type) {
		case *dns.A:
			x := *v
			c = &x
		case *dns.AAAA:
			x := *v
			c = &x
		case *dns.SRV:
			x := *v
			c = &x
		case *dns.CNAME:
			x := *v
			c = &x
		case *dns.PTR:
			x := *v
			c = &x
		case *dns.NS:
			x := *v
			c = &x
		case *dns.SOA:
			x := *v
			c = &x
		default:
			c = dns.Copy(rr)
		}
		if owner != "" {
			c.Header().Name = owner
		}
		dst = append(dst, c)
	}
	return dst
}
