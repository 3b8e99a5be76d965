package applier

import (
	"net/netip"
	"slices"

	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

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
// it, under its lock; a transfer reads committed entries, which are never changed. It reads what
// it journals from the tree and the reverse index, which the applier writes.
type journal struct {
	tree    *tree.Tree
	reverse *records.ReverseIndex // nil without reverse zones
	build   *records.Builder
	zones   []string             // every zone of the server block
	ptrZone records.ReverseZones // the reverse zones, for the zone of an address's PTR

	entries []*journalEntry // oldest first; each one's from is the previous one's to
	held    int             // records held by entries

	pending    map[zoneName]tree.Set // a changed name's set at the last serial move (nil: none)
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
	count    int
}

// delta is what one zone lost and gained.
type delta struct{ deleted, added []dns.RR }

func newJournal(t *tree.Tree, reverse *records.ReverseIndex, build *records.Builder, zones []string) *journal {
	return &journal{tree: t, reverse: reverse, build: build, zones: zones, ptrZone: records.ReverseZonesOf(zones),
		pending: map[zoneName]tree.Set{}, pendingPTR: map[netip.Addr][]string{}}
}

// before notes what name holds before it changes; the first note since the serial moved counts.
// A nil journal (no transfer plugin) notes nothing.
func (j *journal) before(zone, name string) {
	if j == nil {
		return
	}
	key := zoneName{zone, name}
	if _, ok := j.pending[key]; !ok && !j.overflow {
		j.pending[key] = j.tree.Get(zone, name)
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
func (j *journal) beforePTR(old, now *records.ServiceSet) {
	if j == nil || j.reverse == nil {
		return
	}
	note := func(addr netip.Addr) {
		if _, ok := j.pendingPTR[addr]; !ok && !j.overflow {
			j.pendingPTR[addr] = j.reverse.Names(addr)
			j.checkOverflow()
		}
	}
	if change, ok := records.ChangeOf(old, now); ok {
		change.Addrs(note) // a few endpoints of a large service: only theirs
		return
	}
	for _, r := range []*records.ServiceSet{old, now} {
		if r != nil {
			j.reverse.EachAddr(r, func(addr netip.Addr, _ uint32) { note(addr) })
		}
	}
}

// commit journals the move of the serial from one value to the next and returns the zones whose
// records changed.
func (j *journal) commit(from, to uint32) []string {
	if j.overflow {
		// Too much changed to say what: every older serial now gets a full transfer, and every
		// zone may have changed.
		j.overflow, j.entries, j.held = false, nil, 0
		return slices.Clone(j.zones)
	}
	e := &journalEntry{from: from, to: to, zones: map[string]*delta{}}
	var uncompared []string // zones of sets too big to compare record by record
	for key, old := range j.pending {
		now := j.tree.Get(key.zone, key.name)
		if change, ok := changeOf(old, now); ok {
			before, after := change.TransferRecords()
			e.add(key.zone, before, after)
			continue
		}
		if records.TransferSize(old)+records.TransferSize(now) > journalRecords {
			// Comparing every record of a huge set would hold every other change for seconds;
			// its change would not be kept anyway.
			uncompared = append(uncompared, key.zone)
			continue
		}
		e.add(key.zone, records.TransferRecords(nil, old), records.TransferRecords(nil, now))
	}
	if len(j.pendingPTR) > 0 {
		for addr, old := range j.pendingPTR {
			zone := j.ptrZone.ZoneOf(addr)
			if zone == "" {
				continue
			}
			owner := records.ReverseName(addr)
			e.add(zone, j.build.PTRRecords(owner, old), j.build.PTRRecords(owner, j.reverse.Names(addr)))
		}
	}
	clear(j.pending)
	clear(j.pendingPTR)

	var changed []string
	for z, d := range e.zones {
		if len(d.deleted)+len(d.added) > 0 && !slices.Contains(uncompared, z) {
			changed = append(changed, z)
		}
	}
	changed = append(changed, uncompared...)
	slices.Sort(changed)
	changed = slices.Compact(changed)
	if e.count > journalRecords || len(uncompared) > 0 {
		// Too big to keep: every older serial now gets a full transfer.
		j.entries, j.held = nil, 0
		return changed
	}
	j.entries = append(j.entries, e)
	j.held += e.count
	for len(j.entries) > journalEntries || j.held > journalRecords {
		j.held -= j.entries[0].count
		j.entries[0] = nil
		j.entries = j.entries[1:]
	}
	return changed
}

// changeOf is the change between two versions of a name's set, when it can be told from their
// slices (records.ChangeOf): the records to compare are then those of the change, not the set's.
func changeOf(old, now tree.Set) (records.SetChange, bool) {
	o, _ := old.(*records.ServiceSet)
	n, _ := now.(*records.ServiceSet)
	return records.ChangeOf(o, n)
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
		e.count++
	}
	for _, rr := range old {
		if _, ok := was[rr.String()]; ok {
			d.deleted = append(d.deleted, dns.Copy(rr))
			e.count++
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
	var del, add netChange
	for _, e := range entries {
		if d := e.zones[zone]; d != nil {
			for _, rr := range d.deleted {
				del.note(rr, &add)
			}
			for _, rr := range d.added {
				add.note(rr, &del)
			}
		}
	}
	return del.records(), add.records()
}

// netChange is one side of a net change, the records deleted or the records added, in the order
// first seen.
type netChange struct {
	by    map[string]dns.RR
	order []string
}

// note takes rr into the change, unless the other side holds it: then the two cancel out.
func (c *netChange) note(rr dns.RR, other *netChange) {
	s := rr.String()
	if _, ok := other.by[s]; ok {
		delete(other.by, s)
		return
	}
	if c.by == nil {
		c.by = map[string]dns.RR{}
	}
	c.by[s] = rr
	c.order = append(c.order, s)
}

// records are copies of the change's records, each once, in the order first seen.
func (c *netChange) records() []dns.RR {
	var out []dns.RR
	for _, s := range c.order {
		if rr, ok := c.by[s]; ok {
			out = append(out, dns.Copy(rr))
			delete(c.by, s)
		}
	}
	return out
}
