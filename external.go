package kubetree

import (
	"context"
	"slices"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/transfer"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

const externalPluginName = "kubetree_external"

// External serves the external addresses of the cluster's services (spec.externalIPs and load
// balancer ingress) under zones of their own, as <svc>.<ns>.<zone>, with CoreDNS's k8s_external
// names and answers, from the data of the server block's kubetree.
type External struct {
	Next  plugin.Handler
	Zones []string // lower case, fully qualified
	Fall  fall.F

	ttl      uint32
	apex     string // the label under which the zone's nameserver lives: ns1.<apex>.<zone>
	headless bool
	// nameservers and hostmasters are ns1.<apex>.<zone> and hostmaster.<apex>.<zone> of each zone,
	// in the order of Zones, made once for the SOA and NS records.
	nameservers, hostmasters []string

	k        *Kubetree // the server block's kubetree, found at startup
	upstream upstreamer
}

// Name implements the plugin.Handler interface.
func (e *External) Name() string { return externalPluginName }

// ServeDNS implements the plugin.Handler interface.
func (e *External) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) != 1 {
		return plugin.NextOrFailure(e.Name(), e.Next, ctx, w, r)
	}
	q := r.Question[0]
	i := matchZone(e.Zones, q.Name)
	if i < 0 {
		return plugin.NextOrFailure(e.Name(), e.Next, ctx, w, r)
	}
	zone := e.Zones[i]
	base := q.Name[:len(q.Name)-len(zone)] // the labels below the zone, with a trailing dot
	if base == "" {
		return e.serveApex(w, r, i)
	}
	if below, ok := cutSuffixFold(base, e.apex+"."); ok {
		return e.serveNameserver(w, r, i, below)
	}

	answer, extra, rcode := e.find(ctx, w, r, zone, base)
	if rcode == dns.RcodeNameError {
		if e.Fall.Through(q.Name) {
			return plugin.NextOrFailure(e.Name(), e.Next, ctx, w, r)
		}
		if !e.k.synced.Load() {
			rcode = dns.RcodeServerFailure // a client would cache the NXDOMAIN
		}
	}
	return e.write(w, r, i, rcode, answer, extra)
}

// find answers a name below the zone, outside its nameserver's names.
func (e *External) find(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, zone, base string) (answer, extra []dns.RR, rcode int) {
	if q := r.Question[0]; q.Qtype == dns.TypePTR {
		// An external IP's name, in a reverse zone given to kubetree_external: its services.
		if ip, bits, ok := parseReverse(q.Name); ok && bits == ip.BitLen() {
			owners := e.k.external.lookup(ip)
			if len(owners) == 0 {
				return nil, nil, dns.RcodeNameError
			}
			return externalPTR(q.Name, owners, e.Zones[0], e.ttl), nil, dns.RcodeSuccess
		}
	}
	var buf [4]string
	labels, ok := splitLabels(buf[:0], base)
	last := len(labels) - 1
	ns := labels[last]
	_, depth := e.k.tree.at(e.k.serviceZone(), "svc", ns)
	if depth < 2 || !ok {
		return nil, nil, dns.RcodeNameError // no such namespace, or below anything served
	}
	if last == 0 {
		return nil, nil, dns.RcodeSuccess // <ns>.<zone>
	}
	set, _ := e.k.tree.at(e.k.serviceZone(), "svc", ns, labels[last-1])
	s, ok := set.(*svcRecords)
	if !ok {
		return nil, nil, dns.RcodeNameError
	}
	q := r.Question[0]
	eq := &extQuery{owner: q.Name, qtype: q.Qtype, ttl: e.ttl, headless: e.headless}
	switch last {
	case 2:
		eq.endpoint = strings.TrimPrefix(labels[0], "_")
	case 3:
		eq.port, eq.protocol = strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_")
	}
	if q.Qtype == dns.TypeSRV {
		eq.target = labels[last-1] + "." + ns + "." + zone
		if hasUpper(eq.target) {
			eq.target = strings.ToLower(eq.target)
		}
	}
	answer, extra, hosts, found := s.external(eq)
	if !found {
		return nil, nil, dns.RcodeNameError
	}
	for _, host := range hosts {
		switch q.Qtype {
		case dns.TypeA, dns.TypeAAAA:
			answer = e.resolve(ctx, w, r, answer, host, q.Qtype)
		case dns.TypeSRV:
			extra = e.resolve(ctx, w, r, extra, host, dns.TypeA)
			extra = e.resolve(ctx, w, r, extra, host, dns.TypeAAAA)
		}
	}
	return answer, extra, dns.RcodeSuccess
}

// resolve appends the answer for a load balancer's hostname, looked up through the rest of the
// server's chain, as k8s_external does.
func (e *External) resolve(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, dst []dns.RR, host string, qtype uint16) []dns.RR {
	if e.upstream == nil {
		return dst
	}
	m, err := e.upstream.Lookup(ctx, request.Request{W: w, Req: r}, host, qtype)
	if err != nil || m == nil {
		log.Debugf("resolving load balancer hostname %s: %v", host, err)
		return dst
	}
	return append(dst, m.Answer...)
}

// serveApex answers the apex of zone i: its SOA, and its NS with the nameserver's addresses as glue.
func (e *External) serveApex(w dns.ResponseWriter, r *dns.Msg, i int) (int, error) {
	q := r.Question[0]
	switch q.Qtype {
	case dns.TypeSOA:
		return e.write(w, r, i, dns.RcodeSuccess, []dns.RR{e.soa(i)}, nil)
	case dns.TypeNS:
		ns := externalNS(e.Zones[i], e.nameservers[i], e.ttl)
		glue := e.k.nameserverAddresses(nil, ns.Ns, e.ttl, dns.TypeA, e.headless)
		glue = e.k.nameserverAddresses(glue, ns.Ns, e.ttl, dns.TypeAAAA, e.headless)
		return e.write(w, r, i, dns.RcodeSuccess, []dns.RR{ns}, glue)
	}
	return e.write(w, r, i, dns.RcodeSuccess, nil, nil)
}

// serveNameserver answers the names below <apex>.<zone>: <apex> itself is an empty non-terminal,
// ns1.<apex> has the nameserver's addresses, and nothing else exists. below is what is left of the
// name under <apex>.<zone>, with its trailing dot.
func (e *External) serveNameserver(w dns.ResponseWriter, r *dns.Msg, i int, below string) (int, error) {
	q := r.Question[0]
	switch {
	case below == "":
		return e.write(w, r, i, dns.RcodeSuccess, nil, nil)
	case equalFoldASCII(below, "ns1."):
		answer := e.k.nameserverAddresses(nil, q.Name, e.ttl, q.Qtype, e.headless)
		return e.write(w, r, i, dns.RcodeSuccess, answer, nil)
	}
	return e.write(w, r, i, dns.RcodeNameError, nil, nil)
}

// write writes an authoritative reply in zone i; without an answer, with the zone's SOA.
func (e *External) write(w dns.ResponseWriter, r *dns.Msg, i int, rcode int, answer, extra []dns.RR) (int, error) {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	m.Answer, m.Extra = answer, extra
	if len(answer) == 0 {
		m.Ns = []dns.RR{e.soa(i)}
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

func (e *External) soa(i int) *dns.SOA {
	return externalSOA(e.Zones[i], e.nameservers[i], e.hostmasters[i], e.ttl, e.k.serial())
}

// cutSuffixFold is strings.CutSuffix ignoring ASCII case, for a suffix that starts a label.
func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || !equalFoldASCII(s[len(s)-len(suffix):], suffix) {
		return s, false
	}
	before := s[:len(s)-len(suffix)]
	if before != "" && before[len(before)-1] != '.' {
		return s, false
	}
	return before, true
}

// splitLabels appends the labels of name (with its trailing dot) to dst, up to its capacity; ok is
// false when name has more.
func splitLabels(dst []string, name string) (_ []string, ok bool) {
	for name != "" {
		if len(dst) == cap(dst) {
			return dst, false
		}
		i := 0
		for i < len(name) && (name[i] != '.' || escaped(name, i)) {
			i++
		}
		dst = append(dst, name[:i])
		name = name[min(i+1, len(name)):]
	}
	return dst, true
}

// nameserverAddresses appends the addresses of type qtype that k8s_external gives
// ns1.<apex>.<zone>, owned by owner with ttl, as the in-tree plugin finds them: when this server is
// an endpoint of services (the cluster's DNS service), their external IPs (with headless, a
// headless one's endpoints); otherwise the addresses this server answers on (ns.dns.<zone>'s).
func (k *Kubetree) nameserverAddresses(dst []dns.RR, owner string, ttl uint32, qtype uint16, headless bool) []dns.RR {
	if dst, found := k.behind.Load().externalNameservers(dst, qtype, owner, ttl, headless); found {
		return dst
	}
	set, _ := k.tree.at(k.forward[0], "dns", "ns")
	s, ok := set.(*rrsets)
	if !ok {
		return dst
	}
	first := len(dst)
	dst = appendCopies(dst, s.of(qtype), owner)
	for _, rr := range dst[first:] {
		rr.Header().Ttl = ttl
	}
	return dst
}

// serviceZone is the zone whose service names kubetree_external reads, the first that services live
// in; "" (no names) for a stanza of multicluster zones only.
func (k *Kubetree) serviceZone() string {
	if len(k.svcZones) == 0 {
		return ""
	}
	return k.svcZones[0]
}

// serial is the SOA serial of the cluster: the second of its last change.
func (k *Kubetree) serial() uint32 {
	set, _ := k.tree.at(k.forward[0])
	if s, ok := set.(*rrsets); ok && len(s.SOA) > 0 {
		return s.SOA[0].(*dns.SOA).Serial
	}
	return 0
}

// Transfer implements transfer.Transferer: with the transfer plugin in the server block, AXFR of a
// kubetree_external zone carries what k8s_external's transfer carries: the apex (SOA, NS, the
// nameserver's addresses), and every service with external addresses (with headless, every
// headless service) with its records, made as the answers to queries for its names are. The SOA
// serial is the cluster's; a secondary that has it gets the SOA alone.
func (e *External) Transfer(zone string, serial uint32) (<-chan []dns.RR, error) {
	i := slices.Index(e.Zones, zone)
	if i < 0 || e.k == nil {
		return nil, transfer.ErrNotAuthoritative
	}
	if !e.k.synced.Load() {
		return nil, errNotSynced // a secondary would serve the part listed so far as the whole zone
	}
	soa := e.soa(i)
	var sets []*svcRecords
	if serial == 0 || serialBefore(serial, soa.Serial) {
		e.k.tree.each(e.k.serviceZone(), func(s recordSet) {
			if r, ok := s.(*svcRecords); ok && r.hasExternalNames(e.headless) {
				sets = append(sets, r)
			}
		})
	}
	ch := make(chan []dns.RR)
	go func() {
		defer close(ch)
		ch <- []dns.RR{soa}
		if serial != 0 && !serialBefore(serial, soa.Serial) {
			return // a single SOA: the secondary is up to date
		}
		ns := externalNS(zone, e.nameservers[i], e.ttl)
		apex := []dns.RR{ns}
		apex = e.k.nameserverAddresses(apex, ns.Ns, e.ttl, dns.TypeA, e.headless)
		ch <- e.k.nameserverAddresses(apex, ns.Ns, e.ttl, dns.TypeAAAA, e.headless)
		suffix := ".svc." + e.k.serviceZone()
		for _, r := range sets {
			base := strings.TrimSuffix(r.name, suffix) + "." + zone
			if rrs := r.externalTransfer(nil, base, e.ttl, e.headless); len(rrs) > 0 {
				ch <- rrs
			}
		}
		ch <- []dns.RR{dns.Copy(soa)}
	}()
	return ch, nil
}
