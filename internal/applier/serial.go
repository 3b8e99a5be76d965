package applier

import (
	"time"

	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// The applier's SOA serial: it moves to the current second after a change, at most once a second
// (a change in the second the serial last moved to waits for the next one, on a timer), so that
// it changes whenever the records do, stays monotonic, and follows the clock. Each move is
// journaled and notified, and a zone transfer's snapshot is named by it.

// afterChange moves the serial after a write, or, when it moved in this second already, arms the
// timer that moves it in the next one. The caller holds the lock.
func (a *Applier) afterChange() {
	if !a.dirty || a.serialTimer != nil || a.closed {
		return
	}
	now := time.Now().Unix()
	if now > a.serial {
		a.moveSerial(now)
		return
	}
	a.serialTimer = time.AfterFunc(time.Until(time.Unix(a.serial+1, 0)), func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.serialTimer = nil
		a.afterChange()
	})
}

// settle moves the serial now if records changed since it last moved, one past it when the clock
// has not passed it: a zone transfer's snapshot must be named by its own serial.
func (a *Applier) settle() {
	if a.dirty {
		a.moveSerial(max(time.Now().Unix(), a.serial+1))
	}
}

// moveSerial publishes every zone's SOA with serial to, and journals the changes since the last one.
func (a *Applier) moveSerial(to int64) {
	from := a.serial
	a.serial, a.dirty = to, false
	a.Tree.Publish(a.apexes()...)
	if a.journal != nil {
		zones := a.journal.commit(uint32(from), uint32(to))
		a.notify.changed(zones)
	}
}

// Snapshot is what one transfer sends: the SOA, and either nothing more (the secondary is
// current), the journal's changes since its serial (IXFR), or every set of the zone (AXFR; in a
// reverse zone the apex, and the first forward zone's services, whose addresses the PTRs are).
type Snapshot struct {
	SOA      *dns.SOA
	Current  bool
	Sets     []tree.Set
	Services []*records.ServiceSet // a reverse zone's
	entries  []*journalEntry
}

// Incremental reports whether the snapshot is the journal's changes since the secondary's serial.
func (s Snapshot) Incremental() bool { return s.entries != nil }

// Changes are zone's net changes since the secondary's serial, in RFC 1995's condensed form.
func (s Snapshot) Changes(zone string) (deleted, added []dns.RR) { return condense(s.entries, zone) }

// Snapshot takes a transfer's snapshot of z for a secondary at serial (0: AXFR). Changes whose
// serial has not moved yet get one now, so that the snapshot is named by its own serial. Published
// sets are never changed, so the records are made from them afterwards, outside the lock.
func (a *Applier) Snapshot(z records.ServedZone, serial uint32) Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settle()
	apex := a.Tree.Get(z.Name, z.Name).(*records.FixedSet)
	s := Snapshot{SOA: dns.Copy(apex.SOA[0]).(*dns.SOA)}
	if serial != 0 {
		if !records.SerialBefore(serial, s.SOA.Serial) {
			s.Current = true
			return s
		}
		if entries := a.journal.since(serial); len(entries) > 0 && entries[len(entries)-1].to == s.SOA.Serial {
			s.entries = entries
			return s
		}
	}
	if !z.Reverse {
		a.Tree.Each(z.Name, func(set tree.Set) { s.Sets = append(s.Sets, set) })
		return s
	}
	s.Sets = append(s.Sets, apex)
	a.Tree.Each(a.forward[0], func(set tree.Set) {
		if r, ok := set.(*records.ServiceSet); ok {
			s.Services = append(s.Services, r)
		}
	})
	return s
}
