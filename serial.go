package kubetree

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
func (a *applier) afterChange() {
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
func (a *applier) settle() {
	if a.dirty {
		a.moveSerial(max(time.Now().Unix(), a.serial+1))
	}
}

// moveSerial publishes every zone's SOA with serial to, and journals the changes since the last one.
func (a *applier) moveSerial(to int64) {
	from := a.serial
	a.serial, a.dirty = to, false
	a.tree.Publish(a.apexes()...)
	if a.journal != nil {
		zones := a.journal.commit(uint32(from), uint32(to))
		a.notify.changed(zones)
	}
}

// xfrSnapshot is what one transfer sends: the SOA, and either nothing more (the secondary is
// current), the journal entries since its serial (IXFR), or every set of the zone (AXFR; in a
// reverse zone the apex, and the first forward zone's services, whose addresses the PTRs are).
type xfrSnapshot struct {
	soa      *dns.SOA
	current  bool
	entries  []*journalEntry
	sets     []tree.Set
	services []*records.ServiceSet // a reverse zone's
}

// snapshot takes a transfer's snapshot of z for a secondary at serial (0: AXFR). Changes whose
// serial has not moved yet get one now, so that the snapshot is named by its own serial.
func (a *applier) snapshot(z zone, serial uint32) xfrSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settle()
	apex := a.tree.Get(z.name, z.name).(*records.FixedSet)
	s := xfrSnapshot{soa: dns.Copy(apex.SOA[0]).(*dns.SOA)}
	if serial != 0 {
		if !records.SerialBefore(serial, s.soa.Serial) {
			s.current = true
			return s
		}
		if entries := a.journal.since(serial); len(entries) > 0 && entries[len(entries)-1].to == s.soa.Serial {
			s.entries = entries
			return s
		}
	}
	if !z.reverse {
		a.tree.Each(z.name, func(set tree.Set) { s.sets = append(s.sets, set) })
		return s
	}
	s.sets = append(s.sets, apex)
	a.tree.Each(a.forward[0], func(set tree.Set) {
		if r, ok := set.(*records.ServiceSet); ok {
			s.services = append(s.services, r)
		}
	})
	return s
}
