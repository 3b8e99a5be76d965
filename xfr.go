package kubetree

import (
	"github.com/coredns/coredns/plugin/transfer"

	"github.com/kubetree/kubetree/internal/records"

	"github.com/miekg/dns"
)

// Transfer implements transfer.Transferer: the transfer plugin, when it is in the server block,
// hands AXFR and IXFR of the zones we serve here, after its own ACL (to) has allowed them.
//
// A transfer is a snapshot: the sets the zone holds, and the SOA serial that names them, are taken
// together under the applier's lock (pointers only: record sets are never changed once published),
// and the records are made from them afterwards, while the cluster goes on changing.
func (k *Kubetree) Transfer(zone string, serial uint32) (<-chan []dns.RR, error) {
	i := -1
	for j, z := range k.zones {
		if z.Name == zone {
			i = j
		}
	}
	if i < 0 || k.applier == nil {
		return nil, transfer.ErrNotAuthoritative
	}
	if !k.synced.Load() {
		// A secondary would serve the part listed so far as the whole zone.
		return nil, records.ErrNotSynced
	}
	z := k.zones[i]
	snap := k.applier.Snapshot(z, serial)
	ch := make(chan []dns.RR)
	go func() {
		defer close(ch)
		soa := []dns.RR{snap.SOA}
		ch <- soa
		switch {
		case snap.Current:
			return // a single SOA: the secondary is up to date
		case snap.Incremental():
			old := dns.Copy(snap.SOA).(*dns.SOA)
			old.Serial = serial
			deleted, added := snap.Changes(z.Name)
			ch <- []dns.RR{old}
			ch <- deleted
			ch <- []dns.RR{dns.Copy(snap.SOA)}
			ch <- added
		case z.Reverse:
			ch <- records.TransferRecords(nil, snap.Sets[0]) // the apex
			ch <- k.build.ZonePTRs(z.Name, records.ReverseZonesOf(k.Zones), snap.Services)
		default:
			for _, s := range snap.Sets {
				if rrs := records.TransferRecords(nil, s); len(rrs) > 0 {
					ch <- rrs
				}
			}
		}
		ch <- []dns.RR{dns.Copy(snap.SOA)}
	}()
	return ch, nil
}
