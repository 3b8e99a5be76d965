// Package query answers one query in a server block's zones from what the write side has
// published: the tree of record sets, the reverse index and the pod index, for the client that
// asked (its view: isolation and topology). It never changes what the write side published (its
// own state is isolation's set of labelled namespaces and a cache of writer types, both bounded);
// what it answers is decided when the cluster changes, and only the reply's own records are made
// per query.
package query

import (
	"context"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/coredns/coredns/plugin/pkg/fall"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

var log = clog.NewWithPlugin("kubetree")

// Upstream resolves names outside our zones through the rest of the server's chain; CoreDNS's
// upstream package in production, a stand-in in tests.
type Upstream interface {
	Lookup(ctx context.Context, state request.Request, name string, typ uint16) (*dns.Msg, error)
}

// PodMode is the pods option: whether and how <address>.<ns>.pod.<zone> is answered.
type PodMode uint8

// The pods option's values, as in the in-tree kubernetes plugin.
const (
	PodsDisabled PodMode = iota
	PodsInsecure
	PodsVerified
)

// Options are what an Answerer reads: the published state (written by the applier alone) and the
// options of the Corefile that decide answers per query.
type Options struct {
	Zones []records.ServedZone
	Fall  fall.F
	// Synced is set once the first full state from the API server is published: until then a
	// name we do not know is SERVFAIL, never NXDOMAIN.
	Synced  *atomic.Bool
	Tree    *tree.Tree
	Reverse *records.ReverseIndex // nil without reverse zones
	Build   *records.Builder
	Pods    *object.PodIndex  // nil unless pods verified
	Nodes   *object.NodeIndex // each node's topology zone; nil without topology
	// Isolation limits what each client pod resolves; nil without the isolate option.
	Isolation *Isolation
	Upstream  Upstream // nil: an ExternalName outside our zones is not resolved
	PodMode   PodMode
	// ClientSubnetFrom are the sources whose EDNS0 client-subnet option (a whole address) names
	// the client instead of the packet's source: a node-local cache forwarding for its pods.
	ClientSubnetFrom []netip.Prefix
}

// Answerer answers queries in the zones of one server block.
type Answerer struct {
	Options
	names []string // Zones' names, for tree.MatchZone
}

// New returns the Answerer of o.
func New(o Options) *Answerer {
	a := &Answerer{Options: o}
	for _, z := range o.Zones {
		a.names = append(a.names, z.Name)
	}
	return a
}

// maxChase bounds how many ExternalName services pointing at each other one answer follows.
const maxChase = 8

// Answer replies to r, a query of one question in z. next is true when it wrote nothing and the
// query goes on to the next plugin (fallthrough).
func (a *Answerer) Answer(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, z records.ServedZone) (rcode int, next bool) {
	q := r.Question[0]
	switch {
	case q.Qclass != dns.ClassINET:
		return dns.RcodeRefused, false
	case q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR:
		// Transfers are the transfer plugin's, which calls Transfer after its ACL has allowed one;
		// one that reaches the handler was not allowed (or there is no transfer plugin), and would
		// enumerate every service in the cluster.
		return dns.RcodeRefused, false
	}

	v := a.viewOf(ctx, w, r)
	state := request.Request{W: w, Req: r}
	found := a.find(q.Name, z, q.Qtype, v, records.RoomFor(state.Size()))
	if !found.Exists {
		// Fallthrough first, synced or not, as in the in-tree plugin: the kubeadm Corefile's
		// `fallthrough in-addr.arpa ip6.arpa` sends the PTR queries of addresses outside the
		// cluster on, and they must not fail while the cluster is being listed.
		if a.Fall.Through(q.Name) && !isInternal(ctx) {
			return 0, true
		}
		if !a.Synced.Load() {
			// Not synced: we do not know the name is absent, and a client would cache an NXDOMAIN.
			return a.negative(w, r, z.Name, dns.RcodeServerFailure), false
		}
		return a.negative(w, r, z.Name, dns.RcodeNameError), false
	}
	if q.Qtype == dns.TypeANY {
		// ANY reveals nothing, not even an ExternalName's CNAME, and is not sent upstream.
		return a.negative(w, r, z.Name, dns.RcodeSuccess), false
	}
	if found.CNAME != "" && q.Qtype != dns.TypeCNAME {
		found = a.chase(ctx, w, r, found, q.Qtype, v, records.RoomFor(state.Size()))
	}
	if len(found.Answer) == 0 {
		return a.negative(w, r, z.Name, dns.RcodeSuccess), false
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	// Truncated: answer records were left out, more than the transport carries. The client asks
	// again over TCP, and caches do not keep the reply.
	m.Truncated = found.Truncated
	m.Answer, m.Extra = found.Answer, found.Extra
	w.WriteMsg(m)
	return dns.RcodeSuccess, false
}

// find makes the records of one type at qname in z, owned by qname as asked (for v's client, with
// topology), and the SRV targets' addresses for the additional section, at most room records.
// Exists is false when the name does not exist, or v may not resolve it.
func (a *Answerer) find(qname string, z records.ServedZone, qtype uint16, v view, room int) (found records.Reply) {
	if z.Reverse && a.Reverse != nil && len(qname) > len(z.Name) {
		owners, exists := a.Reverse.Owners(qname)
		if owners.Exists() {
			var hidden bool
			if owners, hidden = v.keepPTR(owners); hidden {
				v.hid()
				exists = owners.Exists()
			}
		}
		if exists && owners.Exists() && qtype == dns.TypePTR {
			found.Answer = a.Build.PTR(qname, owners)
		}
		found.Exists = exists
		return found
	}
	if !v.allowsName(qname, z.Name) {
		v.hid()
		return found
	}
	set, rest, exists := a.Tree.Lookup(qname, z.Name)
	switch s := set.(type) {
	case *records.ServiceSet:
		return s.Answer(qname, rest, qtype, v.topology, room)
	case *records.FixedSet:
		if qtype == dns.TypeNS {
			found.Extra = records.AppendCopies(nil, s.Glue, "")
		}
		found.Answer, found.Exists = records.AppendCopies(nil, s.OfType(qtype), qname), true
		// The SOA's and NS's names, and the glue's, in the zone as asked (case.go).
		asked := records.ZoneAsAsked(qname, z.Name)
		records.WriteZoneAsAsked(found.Answer, z.Name, asked)
		records.WriteZoneAsAsked(found.Extra, z.Name, asked)
		return found
	}
	if !exists && a.PodMode != PodsDisabled {
		found.Answer, exists = a.podRecords(qname, z.Name, qtype)
	}
	found.Exists = exists // an empty non-terminal, a name without records, or no name
	return found
}

// chase follows the ExternalName's target of found: in the tree when it is in a zone we serve
// (where it may be another ExternalName), otherwise through the rest of the server's chain.
func (a *Answerer) chase(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, found records.Reply, qtype uint16, v view, room int) records.Reply {
	target := found.CNAME
	for range maxChase {
		if ownsCNAME(found.Answer, target) {
			return found // ExternalName services that point at each other: a loop, stop
		}
		i := tree.MatchZone(a.names, target)
		if i < 0 {
			if a.Upstream == nil || isInternal(ctx) {
				return found
			}
			state := request.Request{W: w, Req: r}
			m, err := a.Upstream.Lookup(ctx, state, target, qtype)
			if err != nil || m == nil {
				log.Debugf("resolving %s for an ExternalName service: %v", target, err)
				return found
			}
			found.Answer = append(found.Answer, m.Answer...)
			// An upstream reply cut short is cut short here too, as the in-tree plugin passes it
			// on: a client that took it as whole would miss the records left out.
			found.Truncated = found.Truncated || m.Truncated
			return found
		}
		more := a.find(target, a.Zones[i], qtype, v, room-len(found.Answer)-len(found.Extra))
		if !more.Exists {
			return found
		}
		found.Answer, found.Extra = append(found.Answer, more.Answer...), append(found.Extra, more.Extra...)
		found.Truncated = found.Truncated || more.Truncated
		if more.CNAME == "" {
			return found
		}
		target = more.CNAME
	}
	return found
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
func (a *Answerer) negative(w dns.ResponseWriter, r *dns.Msg, zone string, rcode int) int {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	asked := records.ZoneAsAsked(r.Question[0].Name, zone)
	if apex, _, _ := a.Tree.Lookup(zone, zone); apex != nil {
		m.Ns = records.AppendCopies(m.Ns, apex.(*records.FixedSet).NegativeSOA, "")
		records.WriteZoneAsAsked(m.Ns, zone, asked) // its owner, nameserver and mailbox as asked
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess
}

// podRecords answers <address>.<ns>.pod.<zone>: the address is in the name, and the namespace must
// exist; with pods verified, a pod of that namespace must have the address.
func (a *Answerer) podRecords(qname, zone string, qtype uint16) ([]dns.RR, bool) {
	rel := qname[:len(qname)-len(zone)] // <address>.<ns>.pod.
	label, nsPod, _ := strings.Cut(rel, ".")
	ns, pod, _ := strings.Cut(nsPod, ".")
	if label == "" || ns == "" || !tree.EqualFold(pod, "pod.") {
		return nil, false
	}
	if set, _, _ := a.Tree.Lookup(qname[len(label)+1:], zone); set != (records.NameOnly{}) {
		return nil, false
	}
	addr, ok := records.PodLabelAddress(label)
	if !ok || a.PodMode == PodsVerified && !a.Pods.AnyAt(addr, func(p *object.StoredPod) bool {
		return tree.EqualFold(ns, p.Identity.Namespace)
	}) {
		return nil, false
	}
	return a.Build.PodAddress(qname, addr, qtype), true
}

// ZoneOf is the zone of ours that qname is in, the longest that matches; ok is false for none.
func (a *Answerer) ZoneOf(qname string) (z records.ServedZone, ok bool) {
	i := tree.MatchZone(a.names, qname)
	if i < 0 {
		return z, false
	}
	return a.Zones[i], true
}
