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

	f, exists := k.tree.Lookup(q.Name, zone)
	var answer, extra []dns.RR
	cname := ""
	if exists {
		answer, extra, cname, exists = k.records(f, q.Name, q.Qtype)
	}
	if !exists && k.cfg.podMode == podModeInsecure {
		if rrs, ok := k.podRecords(q.Name, zone); ok {
			exists, answer = true, appendCopies(nil, pick(rrs, q.Qtype), "")
		}
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
	if q.Qtype == dns.TypeANY {
		// ANY reveals nothing, not even an ExternalName's CNAME, and is not sent upstream.
		return k.negative(w, r, zone, dns.RcodeSuccess)
	}
	if cname != "" && q.Qtype != dns.TypeCNAME {
		answer, extra = k.chase(ctx, w, r, answer, extra, cname, q.Qtype)
	}
	if len(answer) == 0 {
		return k.negative(w, r, zone, dns.RcodeSuccess)
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.Answer, m.Extra = answer, extra
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// records makes the records of one type at a name that Lookup found, owned by owner (the name as
// asked), and the SRV targets' addresses for the additional section. cname is an ExternalName's
// target, whose CNAME record is in answer; exists is false when the name is below a service but
// names nothing there.
func (k *Kubetree) records(f found, owner string, qtype uint16) (answer, extra []dns.RR, cname string, exists bool) {
	switch {
	case f.ptr.svc != nil:
		if qtype == dns.TypePTR {
			for _, name := range ptrNames(f.ptr, f.morePTR) {
				answer = append(answer, &dns.PTR{Hdr: hdr(owner, dns.TypePTR, k.cfg.ttl), Ptr: name})
			}
		}
		return answer, nil, "", true
	case f.svc == nil:
		if f.rrs == nil {
			return nil, nil, "", true // an empty non-terminal
		}
		return appendCopies(nil, pick(f.rrs, qtype), owner), nil, "", true
	}

	svc := f.svc
	first, second, more := splitRest(f.rest)
	switch {
	case f.rest == "":
		switch {
		case svc.kind == externalName:
			answer = append(answer, &dns.CNAME{Hdr: hdr(owner, dns.TypeCNAME, svc.ttl), Target: svc.cname})
			return answer, nil, svc.cname, true
		case qtype == dns.TypeSRV:
			answer, extra = svc.srv(nil, nil, "", "", owner)
		default:
			answer = svc.addresses(nil, qtype, owner)
		}
		return answer, extra, "", true
	case svc.kind == externalName || more:
		return nil, nil, "", false
	case second == "" && strings.HasPrefix(first, "_"):
		return nil, nil, "", svc.hasProtocol(first[1:]) // _<proto>.<svc>: an empty non-terminal
	case second == "" && qtype == dns.TypeSRV:
		answer, extra, exists = svc.endpointSRV(first, owner)
		return answer, extra, "", exists
	case second == "":
		answer, exists = svc.endpointAddresses(nil, first, qtype, owner)
		return answer, nil, "", exists
	case strings.HasPrefix(first, "_") && strings.HasPrefix(second, "_"):
		answer, extra = svc.srv(nil, nil, first[1:], second[1:], owner)
		if qtype != dns.TypeSRV {
			return nil, nil, "", len(answer) > 0
		}
		return answer, extra, "", len(answer) > 0
	}
	return nil, nil, "", false
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

// pick returns the records of one type at a name; ANY gets none, so that it reveals nothing.
func pick(rrs *RRSets, qtype uint16) []dns.RR {
	switch qtype {
	case dns.TypeA:
		return rrs.A
	case dns.TypeAAAA:
		return rrs.AAAA
	case dns.TypeTXT:
		return rrs.TXT
	case dns.TypeNS:
		return rrs.NS
	case dns.TypeSOA:
		return rrs.SOA
	}
	return nil
}

// chase follows an ExternalName's target: in the tree when it is in a zone we serve (where it may
// be another ExternalName), otherwise through the rest of the server's chain.
func (k *Kubetree) chase(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, answer, extra []dns.RR, target string, qtype uint16) ([]dns.RR, []dns.RR) {
	for range maxChase {
		if ownsCNAME(answer, target) {
			return answer, extra // ExternalName services that point at each other: a loop, stop
		}
		zone := matchZone(k.Zones, target)
		if zone == "" {
			if k.upstream == nil {
				return answer, extra
			}
			state := request.Request{W: w, Req: r}
			m, err := k.upstream.Lookup(ctx, state, target, qtype)
			if err != nil || m == nil {
				log.Debugf("resolving %s for an ExternalName service: %v", target, err)
				return answer, extra
			}
			return append(answer, m.Answer...), extra
		}
		f, ok := k.tree.Lookup(target, zone)
		if !ok {
			return answer, extra
		}
		more, moreExtra, next, _ := k.records(f, target, qtype)
		answer, extra = append(answer, more...), append(extra, moreExtra...)
		if next == "" {
			return answer, extra
		}
		target = next
	}
	return answer, extra
}

// ownsCNAME reports whether answer has a CNAME owned by name (lower case, as targets are stored).
func ownsCNAME(answer []dns.RR, name string) bool {
	for _, rr := range answer {
		if rr.Header().Rrtype == dns.TypeCNAME && equalFoldASCII(rr.Header().Name, name) {
			return true
		}
	}
	return false
}

// negative writes NXDOMAIN, NODATA (rcode success) or SERVFAIL with the zone's SOA.
func (k *Kubetree) negative(w dns.ResponseWriter, r *dns.Msg, zone string, rcode int) (int, error) {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	qname := r.Question[0].Name
	if apex, _ := k.tree.Lookup(zone, zone); apex.rrs != nil {
		m.Ns = appendCopies(m.Ns, apex.rrs.SOA, qname[len(qname)-len(zone):])
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
	if ns, ok := k.tree.Lookup(qname[dot+1:], zone); !ok || ns.rrs != nil || ns.svc != nil || strings.Count(rel, ".") != 3 {
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
	if ip == nil || (strings.Contains(text, ":") && ip.To4() != nil) {
		return nil, false // not an address, or IPv4-mapped IPv6: an IPv4 address dressed as AAAA
	}
	rrs := &RRSets{}
	if v4 := ip.To4(); v4 != nil && strings.Contains(text, ".") {
		rrs.A = []dns.RR{&dns.A{Hdr: hdr(qname, dns.TypeA, k.cfg.ttl), A: v4}}
	} else {
		rrs.AAAA = []dns.RR{&dns.AAAA{Hdr: hdr(qname, dns.TypeAAAA, k.cfg.ttl), AAAA: ip}}
	}
	return rrs, true
}

// appendCopies appends copies of src to dst, renamed to owner unless owner is "". Only the few
// records held ready (apex, dns-version, ns.dns, pods) come here, and they are never handed out:
// later plugins reorder and rename what they get.
func appendCopies(dst, src []dns.RR, owner string) []dns.RR {
	for _, rr := range src {
		c := dns.Copy(rr)
		if owner != "" {
			c.Header().Name = owner
		}
		dst = append(dst, c)
	}
	return dst
}
