package external

import (
	"slices"

	"github.com/coredns/coredns/plugin/transfer"

	"github.com/kubetree/kubetree/internal/records"

	"github.com/miekg/dns"
)

// Transfer implements transfer.Transferer: with the transfer plugin in the server block, AXFR of a
// kubetree_external zone carries what k8s_external's transfer carries: the apex (SOA, NS, the
// nameserver's addresses), and every service with external addresses (with headless, every
// headless service) with its records, made as the answers to queries for its names are. The SOA
// serial is the cluster's; a secondary that has it gets the SOA alone.
func (e *External) Transfer(zone string, serial uint32) (<-chan []dns.RR, error) {
	i := slices.Index(e.Zones, zone)
	if i < 0 || e.cluster == nil {
		return nil, transfer.ErrNotAuthoritative
	}
	if !e.cluster.Synced() {
		return nil, records.ErrNotSynced // a secondary would serve the part listed so far as the whole zone
	}
	soa := e.soa(i)
	type named struct {
		base string // <svc>.<ns>.<zone>
		set  *records.ServiceSet
	}
	var sets []named
	if serial == 0 || records.SerialBefore(serial, soa.Serial) {
		e.cluster.EachServiceSet(func(ns, name string, r *records.ServiceSet) {
			if r.HasExternalNames(e.headless) {
				sets = append(sets, named{name + "." + ns + "." + zone, r})
			}
		})
	}
	ch := make(chan []dns.RR)
	go func() {
		defer close(ch)
		ch <- []dns.RR{soa}
		if serial != 0 && !records.SerialBefore(serial, soa.Serial) {
			return // a single SOA: the secondary is up to date
		}
		ns := records.ExternalNS(zone, e.nameservers[i], e.ttl)
		apex := []dns.RR{ns}
		apex = e.cluster.ExternalNameservers(apex, ns.Ns, e.ttl, dns.TypeA, e.headless)
		ch <- e.cluster.ExternalNameservers(apex, ns.Ns, e.ttl, dns.TypeAAAA, e.headless)
		for _, s := range sets {
			if rrs := s.set.ExternalTransfer(nil, s.base, e.ttl, e.headless); len(rrs) > 0 {
				ch <- rrs
			}
		}
		ch <- []dns.RR{dns.Copy(soa)}
	}()
	return ch, nil
}
