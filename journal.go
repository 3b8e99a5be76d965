package kubetree

import (
	"net/netip"

	"github.com/miekg/dns"
)

// The journal bounds: past either, the oldest changes go, and a secondary that asks for them gets
// a full transfer instead. A journaled record costs about 150 bytes, so 20,000 of them hold about
// 3 MiB; a change bigger than that (a relist) empties the journal.
const (
	journalEntries = 256
	journalRecords = 20000
)

// journal keeps, for IXFR, the records each move of the SOA serial added and deleted in each
// zone. Between two moves it remembers what every changed name held before the first change
// (pending), and at the move compares that with what the name holds now. Only the applier writes
// it, under its lock; a transfer reads committed entries, which are never changed.
type journal struct {
	entries []*journalEntry // oldest first; each one's from is the previous one's to
	records int             // records held by entries

	pending    map[zoneName]recordSet // a changed name's set at the last serial move (nil: none)
	pendingPTR map[netip.Addr][]string
	// overflow says that more names changed since the last move than the journal could hold
	// records of: the pending notes are dropped (a burst must not cost memory in proportion to
	// its size) and the move empties the journal.
	overflow bool
}

type zoneName struct{ zone, name string }

// journalEntry is one move of the serial, from one value to the next, with what changed per zone.
type journalEntry struct {
	from, to uint32
	zones    map[string]*delta
	records  int
}

// delta is what one zone lost and gained.
type delta struct{ deleted, added []dns.RR }

func newJournal() *journal {
	return &journal{pending: map[zoneName]recordSet{}, pendingPTR: map[netip.Addr][]string{}}
}

// before notes what name holds before it changes; the first note since the serial moved counts.
// A nil journal (no transfer plugin) notes nothing.
func (j *journal) before(a *applier, zone, name string) {
	if j == nil {
		return
	}
	key := zoneName{zone, name}
	if _, ok := j.pending[key]; !ok && !j.overflow {
		j.pending[key] = a.tree.get(zone, name)
		j.checkOverflow()
	}
}

func (j *journal) checkOverflow() {
	if len(j.pending)+len(j.pendingPTR) > journalRecords {
		j.overflow = true
		clear(j.pending)
		clear(j.pendingPTR)
	}
}

// beforePTR notes the PTR names of every address of a service's old and new records before the
// reverse index takes the change: an address's PTR depends on all of its owners.
func (j *journal) beforePTR(a *applier, old, now *svcRecords) {
	if a.reverse == nil {
		return
	}
	for _, r := range []*svcRecords{old, now} {
		if r == nil {
			continue
		}
		a.reverse.each(r, func(addr netip.Addr, _ uint32) {
			if _, ok := j.pendingPTR[addr]; !ok && !j.overflow {
				j.pendingPTR[addr] = a.reverse.names(addr)
				j.checkOverflow()
			}
		})
	}
}

// commit journals the move of the serial from one value to the next and returns the zones whose
// records changed.
func (j *journal) commit(a *applier, from, to uint32) []string {
	if j.overflow {
		// Too much changed to say what: every older serial now gets a full transfer, and every
		// zone may have changed.
		j.overflow, j.entries, j.records = false, nil, 0
		zones := make([]string, len(a.zones))
		for i, z := range a.zones {
			zones[i] = z.name
		}
		return zones
	}
	e := &journalEntry{from: from, to: to, zones: map[string]*delta{}}
	for key, old := range j.pending {
		e.add(key.zone, transferRecords(nil, old), transferRecords(nil, a.tree.get(key.zone, key.name)))
	}
	if len(j.pendingPTR) > 0 {
		reverse := reverseZones(a.zones)
		for addr, old := range j.pendingPTR {
			zone := reverse.of(addr)
			if zone == "" {
				continue
			}
			owner := reverseName(addr)
			e.add(zone, a.build.ptrRecords(owner, old), a.build.ptrRecords(owner, a.reverse.names(addr)))
		}
	}
	clear(j.pending)
	clear(j.pendingPTR)

	var changed []string
	for z, d := range e.zones {
		if len(d.deleted)+len(d.added) > 0 {
			changed = append(changed, z)
		}
	}
	if e.records > journalRecords {
		// Too big to keep: every older serial now gets a full transfer.
		j.entries, j.records = nil, 0
		return changed
	}
	j.entries = append(j.entries, e)
	j.records += e.records
	for len(j.entries) > journalEntries || j.records > journalRecords {
		j.records -= j.entries[0].records
		j.entries[0] = nil
		j.entries = j.entries[1:]
	}
	return changed
}

// add journals the difference between a name's records before and after; the records kept are
// copies, so that the journal holds none of the tree's packed addresses.
func (e *journalEntry) add(zone string, old, now []dns.RR) {
	if len(old) == 0 && len(now) == 0 {
		return
	}
	was := make(map[string]dns.RR, len(old))
	for _, rr := range old {
		was[rr.String()] = rr
	}
	d := e.zones[zone]
	if d == nil {
		d = &delta{}
		e.zones[zone] = d
	}
	for _, rr := range now {
		s := rr.String()
		if _, ok := was[s]; ok {
			delete(was, s)
			continue
		}
		d.added = append(d.added, dns.Copy(rr))
		e.records++
	}
	for _, rr := range old {
		if _, ok := was[rr.String()]; ok {
			d.deleted = append(d.deleted, dns.Copy(rr))
			e.records++
		}
	}
}

// since returns the entries that lead from serial to the current one, or nil when serial is not
// journaled (too old, or never served).
func (j *journal) since(serial uint32) []*journalEntry {
	if j == nil {
		return nil
	}
	for i, e := range j.entries {
		if e.from == serial {
			return append([]*journalEntry(nil), j.entries[i:]...)
		}
	}
	return nil
}

// condense folds a run of entries into one zone's net change (RFC 1995's condensed form): a record
// added and then deleted again is in neither list.
func condense(entries []*journalEntry, zone string) (deleted, added []dns.RR) {
	del, add := map[string]dns.RR{}, map[string]dns.RR{}
	var delOrder, addOrder []string
	for _, e := range entries {
		d := e.zones[zone]
		if d == nil {
			continue
		}
		for _, rr := range d.deleted {
			s := rr.String()
			if _, ok := add[s]; ok {
				delete(add, s)
				continue
			}
			del[s] = rr
			delOrder = append(delOrder, s)
		}
		for _, rr := range d.added {
			s := rr.String()
			if _, ok := del[s]; ok {
				delete(del, s)
				continue
			}
			add[s] = rr
			addOrder = append(addOrder, s)
		}
	}
	for _, s := range delOrder {
		if rr, ok := del[s]; ok {
			deleted = append(deleted, dns.Copy(rr))
			delete(del, s)
		}
	}
	for _, s := range addOrder {
		if rr, ok := add[s]; ok {
			added = append(added, dns.Copy(rr))
			delete(add, s)
		}
	}
	return deleted, added
}
