package external

import (
	"context"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

const pluginName = "kubetree_external"

var log = clog.NewWithPlugin(pluginName)

// Upstream resolves names outside the cluster (load balancer hostnames) through the rest of the
// server's chain: CoreDNS's upstream package.
type Upstream interface {
	Lookup(ctx context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error)
}

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

	cluster  Cluster // the server block's kubetree, found at startup
	upstream Upstream
}

// Use gives e the cluster it serves from and the upstream that resolves load balancer hostnames.
func (e *External) Use(cluster Cluster, upstream Upstream) {
	e.cluster, e.upstream = cluster, upstream
}

// Name implements the plugin.Handler interface.
func (e *External) Name() string { return pluginName }

// ServeDNS implements the plugin.Handler interface.
func (e *External) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) != 1 {
		return plugin.NextOrFailure(e.Name(), e.Next, ctx, w, r)
	}
	q := r.Question[0]
	i := tree.MatchZone(e.Zones, q.Name)
	if i < 0 {
		return plugin.NextOrFailure(e.Name(), e.Next, ctx, w, r)
	}
	zone := e.Zones[i]
	base := q.Name[:len(q.Name)-len(zone)] // the labels below the zone, with a trailing dot
	if base == "" {
		return e.serveApex(w, r, i)
	}
	if below, ok := tree.CutSuffixFold(base, e.apex+"."); ok {
		return e.serveNameserver(w, r, i, below)
	}

	found, rcode := e.find(ctx, w, r, zone, base)
	if rcode == dns.RcodeNameError {
		if e.Fall.Through(q.Name) {
			return plugin.NextOrFailure(e.Name(), e.Next, ctx, w, r)
		}
		if !e.cluster.Synced() {
			rcode = dns.RcodeServerFailure // a client would cache the NXDOMAIN
		}
	}
	return e.write(w, r, i, rcode, found)
}

// find answers a name below the zone, outside its nameserver's names.
func (e *External) find(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, zone, base string) (found records.Reply, rcode int) {
	if q := r.Question[0]; q.Qtype == dns.TypePTR {
		// An external IP's name, in a reverse zone given to kubetree_external: its services.
		if ip, bits, ok := records.ParseReverse(q.Name); ok && bits == ip.BitLen() {
			owners := e.cluster.ExternalServicesAt(ip)
			if len(owners) == 0 {
				return found, dns.RcodeNameError
			}
			found.Answer = records.ExternalPTR(q.Name, owners, e.Zones[0], e.ttl)
			return found, dns.RcodeSuccess
		}
	}
	var buf [4]string
	labels, ok := tree.SplitLabels(buf[:0], base)
	last := len(labels) - 1
	ns := labels[last]
	if !ok || !e.cluster.NamespaceServed(ns) {
		return found, dns.RcodeNameError // no such namespace, or below anything served
	}
	if last == 0 {
		return found, dns.RcodeSuccess // <ns>.<zone>
	}
	s := e.cluster.ServiceSet(ns, labels[last-1])
	if s == nil {
		return found, dns.RcodeNameError
	}
	q := r.Question[0]
	state := request.Request{W: w, Req: r}
	eq := &records.ExternalQuery{Owner: q.Name, Qtype: q.Qtype, TTL: e.ttl, Headless: e.headless, Room: records.RoomFor(state.Size())}
	switch last {
	case 2:
		eq.Endpoint = strings.TrimPrefix(labels[0], "_")
	case 3:
		eq.Port, eq.Protocol = strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_")
	}
	if q.Qtype == dns.TypeSRV {
		eq.Target = labels[last-1] + "." + ns + "." + zone
		if tree.HasUpper(eq.Target) {
			eq.Target = strings.ToLower(eq.Target)
		}
	}
	found, hosts := s.ExternalRecords(eq)
	if !found.Exists {
		return found, dns.RcodeNameError
	}
	for _, host := range hosts {
		switch q.Qtype {
		case dns.TypeA, dns.TypeAAAA:
			// An upstream answer cut short cuts this one short, as in k8s_external (SRV's
			// additional section may be incomplete without TC).
			var cut bool
			found.Answer, cut = e.resolve(ctx, w, r, found.Answer, host, q.Qtype)
			found.Truncated = found.Truncated || cut
		case dns.TypeSRV:
			found.Extra, _ = e.resolve(ctx, w, r, found.Extra, host, dns.TypeA)
			found.Extra, _ = e.resolve(ctx, w, r, found.Extra, host, dns.TypeAAAA)
		}
	}
	return found, dns.RcodeSuccess
}

// resolve appends the answer for a load balancer's hostname, looked up through the rest of the
// server's chain, as k8s_external does; truncated says the upstream set TC on it.
func (e *External) resolve(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, dst []dns.RR, host string, qtype uint16) (_ []dns.RR, truncated bool) {
	if e.upstream == nil {
		return dst, false
	}
	m, err := e.upstream.Lookup(ctx, request.Request{W: w, Req: r}, host, qtype)
	if err != nil || m == nil {
		log.Debugf("resolving load balancer hostname %s: %v", host, err)
		return dst, false
	}
	return append(dst, m.Answer...), m.Truncated
}

// serveApex answers the apex of zone i: its SOA, and its NS with the nameserver's addresses as glue.
func (e *External) serveApex(w dns.ResponseWriter, r *dns.Msg, i int) (int, error) {
	q := r.Question[0]
	switch q.Qtype {
	case dns.TypeSOA:
		return e.write(w, r, i, dns.RcodeSuccess, records.Reply{Answer: []dns.RR{e.soa(i)}})
	case dns.TypeNS:
		ns := records.ExternalNS(e.Zones[i], e.nameservers[i], e.ttl)
		glue := e.cluster.ExternalNameservers(nil, ns.Ns, e.ttl, dns.TypeA, e.headless)
		glue = e.cluster.ExternalNameservers(glue, ns.Ns, e.ttl, dns.TypeAAAA, e.headless)
		return e.write(w, r, i, dns.RcodeSuccess, records.Reply{Answer: []dns.RR{ns}, Extra: glue})
	}
	return e.write(w, r, i, dns.RcodeSuccess, records.Reply{})
}

// serveNameserver answers the names below <apex>.<zone>: <apex> itself is an empty non-terminal,
// ns1.<apex> has the nameserver's addresses, and nothing else exists. below is what is left of the
// name under <apex>.<zone>, with its trailing dot.
func (e *External) serveNameserver(w dns.ResponseWriter, r *dns.Msg, i int, below string) (int, error) {
	q := r.Question[0]
	switch {
	case below == "":
		return e.write(w, r, i, dns.RcodeSuccess, records.Reply{})
	case tree.EqualFold(below, "ns1."):
		answer := e.cluster.ExternalNameservers(nil, q.Name, e.ttl, q.Qtype, e.headless)
		return e.write(w, r, i, dns.RcodeSuccess, records.Reply{Answer: answer})
	}
	return e.write(w, r, i, dns.RcodeNameError, records.Reply{})
}

// write writes an authoritative reply in zone i; without an answer, with the zone's SOA.
// Truncated: answer records were left out, more than the transport carries.
func (e *External) write(w dns.ResponseWriter, r *dns.Msg, i int, rcode int, found records.Reply) (int, error) {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	m.Truncated = found.Truncated
	m.Answer, m.Extra = found.Answer, found.Extra
	if len(found.Answer) == 0 {
		m.Ns = []dns.RR{e.soa(i)}
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

func (e *External) soa(i int) *dns.SOA {
	return records.ExternalSOA(e.Zones[i], e.nameservers[i], e.hostmasters[i], e.ttl, e.cluster.Serial())
}
