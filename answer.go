package kubetree

import (
	"context"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// upstreamer resolves names outside our zones through the rest of the server's chain; CoreDNS's
// upstream package in production, a stand-in in tests.
type upstreamer interface {
	Lookup(ctx context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error)
}

// maxChase bounds how many ExternalName services pointing at each other one answer follows.
const maxChase = 8

// answer replies to a query for a name in z.
func (k *Kubetree) answer(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, z zone) (int, error) {
	q := r.Question[0]
	switch {
	case q.Qclass != dns.ClassINET:
		return dns.RcodeRefused, nil
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		// Transfers are the transfer plugin's, which calls Transfer after its ACL has allowed one;
		// one that reaches the handler was not allowed (or there is no transfer plugin), and would
		// enumerate every service in the cluster.
		return dns.RcodeRefused, nil
	}

	v := k.viewOf(ctx, w, r)
	answer, extra, cname, exists := k.find(q.Name, z, q.Qtype, v)
	if !exists {
		// Fallthrough first, synced or not, as in the in-tree plugin: the kubeadm Corefile's
		// `fallthrough in-addr.arpa ip6.arpa` sends the PTR queries of addresses outside the
		// cluster on, and they must not fail while the cluster is being listed.
		if k.Fall.Through(q.Name) && !probing(ctx) {
			return plugin.NextOrFailure(k.Name(), k.Next, ctx, w, r)
		}
		if !k.synced.Load() {
			// Not synced: we do not know the name is absent, and a client would cache an NXDOMAIN.
			return k.negative(w, r, z.name, dns.RcodeServerFailure)
		}
		return k.negative(w, r, z.name, dns.RcodeNameError)
	}
	if q.Qtype == dns.TypeANY {
		// ANY reveals nothing, not even an ExternalName's CNAME, and is not sent upstream.
		return k.negative(w, r, z.name, dns.RcodeSuccess)
	}
	if cname != "" && q.Qtype != dns.TypeCNAME {
		answer, extra = k.chase(ctx, w, r, answer, extra, cname, q.Qtype, v)
	}
	if len(answer) == 0 {
		return k.negative(w, r, z.name, dns.RcodeSuccess)
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.Answer, m.Extra = answer, extra
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// find makes the records of one type at qname in z, owned by qname as asked (for v's client, with
// topology), and the SRV targets' addresses for the additional section. cname is an ExternalName's target, whose CNAME record is
// in answer; exists is false when the name does not exist, or v may not resolve it.
func (k *Kubetree) find(qname string, z zone, qtype uint16, v view) (answer, extra []dns.RR, cname string, exists bool) {
	if z.reverse && k.reverse != nil && len(qname) > len(z.name) {
		owners, exists := k.reverse.Owners(qname)
		if owners.Exists() {
			var hidden bool
			if owners, hidden = v.keepPTR(owners); hidden {
				v.hid()
				exists = owners.Exists()
			}
		}
		if exists && owners.Exists() && qtype == dns.TypePTR {
			answer = k.build.PTR(qname, owners)
		}
		return answer, nil, "", exists
	}
	if !v.allowsName(qname, z.name) {
		v.hid()
		return nil, nil, "", false
	}
	set, rest, exists := k.tree.Lookup(qname, z.name)
	switch s := set.(type) {
	case *records.ServiceSet:
		return s.Answer(qname, rest, qtype, v.topology)
	case *records.FixedSet:
		if qtype == dns.TypeNS {
			extra = records.AppendCopies(nil, s.Glue, "")
		}
		return records.AppendCopies(nil, s.OfType(qtype), qname), extra, "", true
	}
	if !exists && k.cfg.podMode != podsDisabled {
		answer, exists = k.podRecords(qname, z.name, qtype)
	}
	return answer, nil, "", exists // an empty non-terminal, a name without records, or no name
}

// chase follows an ExternalName's target: in the tree when it is in a zone we serve (where it may
// be another ExternalName), otherwise through the rest of the server's chain.
func (k *Kubetree) chase(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, answer, extra []dns.RR, target string, qtype uint16, v view) ([]dns.RR, []dns.RR) {
	for range maxChase {
		if ownsCNAME(answer, target) {
			return answer, extra // ExternalName services that point at each other: a loop, stop
		}
		i := tree.MatchZone(k.Zones, target)
		if i < 0 {
			if k.upstream == nil || probing(ctx) {
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
		more, moreExtra, next, ok := k.find(target, k.zones[i], qtype, v)
		if !ok {
			return answer, extra
		}
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
		if rr.Header().Rrtype == dns.TypeCNAME && tree.EqualFold(rr.Header().Name, name) {
			return true
		}
	}
	return false
}

// negative writes NXDOMAIN, NODATA (rcode success) or SERVFAIL with the zone's SOA, as negative
// answers carry it (its TTL the negative TTL).
func (k *Kubetree) negative(w dns.ResponseWriter, r *dns.Msg, zone string, rcode int) (int, error) {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	qname := r.Question[0].Name
	if apex, _, _ := k.tree.Lookup(zone, zone); apex != nil {
		m.Ns = records.AppendCopies(m.Ns, apex.(*records.FixedSet).NegativeSOA, qname[len(qname)-len(zone):])
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// podRecords answers <address>.<ns>.pod.<zone>: the address is in the name, and the namespace must
// exist; with pods verified, a pod of that namespace must have the address.
func (k *Kubetree) podRecords(qname, zone string, qtype uint16) ([]dns.RR, bool) {
	rel := qname[:len(qname)-len(zone)] // <address>.<ns>.pod.
	label, nsPod, _ := strings.Cut(rel, ".")
	ns, pod, _ := strings.Cut(nsPod, ".")
	if label == "" || ns == "" || !tree.EqualFold(pod, "pod.") {
		return nil, false
	}
	if set, _, _ := k.tree.Lookup(qname[len(label)+1:], zone); set != (records.NameOnly{}) {
		return nil, false
	}
	addr, ok := records.PodLabelAddress(label)
	if !ok || k.cfg.podMode == podsVerified && !k.pods.AnyAt(addr, func(p *object.StoredPod) bool {
		return tree.EqualFold(ns, p.Identity.Namespace)
	}) {
		return nil, false
	}
	return k.build.PodAddress(qname, addr, qtype), true
}
