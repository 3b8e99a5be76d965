package applier

import (
	"strconv"
	"sync"
	"testing"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestJournalBound: the journal keeps at most journalEntries moves and journalRecords records; an
// IXFR from a serial it dropped is a full transfer.
func TestJournalBound(t *testing.T) {
	a := newTestApplier(t, "10.in-addr.arpa.")
	a.journal = newJournal(a.Tree, a.Reverse, a.build, a.zoneNames())
	zone := a.zones[0]
	first := a.serial
	for i := range journalEntries + 10 {
		a.publishService("prod", "s"+strconv.Itoa(i), model(t, k8stest.ClusterIPService("prod", "s"+strconv.Itoa(i), []string{"10.1.0.1"})))
		a.settle()
	}
	if n := len(a.journal.entries); n != journalEntries {
		t.Errorf("journal holds %d moves, want %d", n, journalEntries)
	}
	if a.Snapshot(zone, uint32(first)).Incremental() {
		t.Error("IXFR from a dropped serial is not a full transfer")
	}
	kept := a.journal.entries[0].from
	s := a.Snapshot(zone, kept)
	if _, added := s.Changes(zone.Name); !s.Incremental() || s.SOA.Serial != uint32(a.serial) || len(added) != journalEntries {
		t.Errorf("IXFR from the oldest kept serial: incremental %v, to %d, %d added", s.Incremental(), s.SOA.Serial, len(added))
	}

	// One change bigger than the record bound empties the journal.
	var sls []*discovery.EndpointSlice
	for s := range 8 {
		var eps []k8stest.Endpoint
		for i := range 1000 {
			eps = append(eps, k8stest.Endpoint{Addrs: []string{"10.2." + strconv.Itoa(s) + "." + strconv.Itoa(i%250)}, Hostname: "h" + strconv.Itoa(s*1000+i)})
		}
		sls = append(sls, k8stest.Slice("prod", "big", "big-"+strconv.Itoa(s), discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("p", "TCP", 1)), eps...))
	}
	a.publishService("prod", "big", model(t, k8stest.HeadlessService("prod", "big", k8stest.TCP("p", 1)), sls...))
	a.settle()
	if n, r := len(a.journal.entries), a.journal.held; n != 0 || r != 0 {
		t.Errorf("after a change of more than %d records the journal holds %d moves, %d records", journalRecords, n, r)
	}
	if a.Snapshot(zone, kept).Incremental() {
		t.Errorf("IXFR after the journal was emptied is not a full transfer")
	}

	// A burst of more names than the journal could hold records of is not noted name by name: the
	// notes stay bounded, and the move empties the journal.
	for i := range 3 {
		name := "again" + strconv.Itoa(i)
		a.publishService("prod", name, model(t, k8stest.ClusterIPService("prod", name, []string{"10.3.0." + strconv.Itoa(i+1)})))
		a.settle()
	}
	if len(a.journal.entries) != 3 {
		t.Fatalf("journal holds %d moves, want 3", len(a.journal.entries))
	}
	for i := range journalRecords + 10 {
		name := "burst" + strconv.Itoa(i)
		a.publishService("prod", name, model(t, k8stest.ClusterIPService("prod", name, []string{"10.4." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250)})))
		if n := len(a.journal.pending) + len(a.journal.pendingPTR); n > journalRecords {
			t.Fatalf("%d pending notes", n)
		}
	}
	a.settle()
	if n := len(a.journal.entries); n != 0 {
		t.Errorf("after a burst of %d services the journal holds %d moves", journalRecords+10, n)
	}
}

// TestNotifyCoalesced: changes while a NOTIFY round is out go in one more round, not one each.
func TestNotifyCoalesced(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sent []string
	n := newNotifier(func(zone string) error {
		mu.Lock()
		sent = append(sent, zone)
		first := len(sent) == 1
		mu.Unlock()
		if first {
			<-release
		}
		return nil
	})
	n.start()
	defer n.close()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(sent) }
	n.changed([]string{clusterZone})
	k8stest.WaitFor(t, "the first NOTIFY", func() bool { return count() == 1 })
	for range 100 {
		n.changed([]string{clusterZone})
	}
	close(release)
	k8stest.WaitFor(t, "the second NOTIFY", func() bool { return count() == 2 })
	_ = n.close() // a third round would have to start within the interval; close waits out the timer
	if got := count(); got != 2 {
		t.Errorf("%d NOTIFY sent for 101 changes, want 2", got)
	}
}

// BenchmarkApplyServiceJournal is a service change with the transfer plugin present: each change
// journaled and its serial moved.
func BenchmarkApplyServiceJournal(b *testing.B) {
	a := newTestApplier(b)
	a.journal = newJournal(a.Tree, a.Reverse, a.build, a.zoneNames())
	a.ApplyNamespace("prod", true)
	svc, sls := stored(b, k8stest.ClusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, k8stest.TCP("http", 80), k8stest.UDP("dns", 53)),
		k8stest.Slice("prod", "web", "web-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("http", "TCP", 8080)),
			k8stest.Endpoint{Addrs: []string{"10.244.0.1"}}, k8stest.Endpoint{Addrs: []string{"10.244.0.2"}}, k8stest.Endpoint{Addrs: []string{"10.244.0.3"}}))
	b.ReportAllocs()
	for b.Loop() {
		a.ApplyService(svc.Key(), svc, sls, true)
		a.settle()
	}
}

// TestHugeChangeNotComparedRecordByRecord: a change of a huge service whose endpoints do not each
// have a name of their own cannot be told from its slices; rather than compare every record
// (seconds, holding every other change), the journal is emptied: a secondary gets a full transfer,
// and is notified.
func TestHugeChangeNotComparedRecordByRecord(t *testing.T) {
	a := newTestApplier(t)
	a.journal = newJournal(a.Tree, a.Reverse, a.build, a.zoneNames())
	a.ApplyNamespace("prod", true)
	zone := a.zones[0]
	svc, sls, versions := hugeService(t, true)
	a.ApplyService(svc.Key(), svc, sls, true)
	a.settle()
	before := uint32(a.serial)
	if !a.Snapshot(zone, before).Current {
		t.Fatal("a secondary at the current serial is not current")
	}
	sls[3] = versions[1]
	a.ApplyService(svc.Key(), svc, sls, true)
	a.settle()
	if len(a.journal.entries) != 0 {
		t.Errorf("the journal holds %d moves after an uncompared change", len(a.journal.entries))
	}
	if s := a.Snapshot(zone, before); s.Current || s.Incremental() {
		t.Errorf("IXFR after an uncompared change: current %v, incremental %v; want a full transfer", s.Current, s.Incremental())
	}
}

// BenchmarkHugeServiceChange is one endpoint of a headless service of 5 slices × 1,000 endpoints ×
// 100 named ports changing, applied and its serial moved, without and with the transfer plugin (the
// journal): what one change of a huge service holds the applier, and every other change, for.
func BenchmarkHugeServiceChange(b *testing.B) {
	for _, bc := range []struct {
		name           string
		transfer, twin bool
	}{{"without transfer", false, false}, {"with transfer", true, false}, {"with transfer, two endpoints named alike", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			a := newTestApplier(b, "10.in-addr.arpa.")
			if bc.transfer {
				a.journal = newJournal(a.Tree, a.Reverse, a.build, a.zoneNames())
			}
			a.ApplyNamespace("prod", true)
			svc, sls, versions := hugeService(b, bc.twin)
			a.ApplyService(svc.Key(), svc, sls, true)
			a.settle()
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				sls[3] = versions[n%2]
				a.ApplyService(svc.Key(), svc, sls, true)
				a.settle()
			}
		})
	}
}

// hugeService is a headless service of 5 slices × 1,000 endpoints × 100 named ports as stored,
// and two versions of its fourth slice that differ in one endpoint's address; with twin, two
// endpoints of its first slice have one hostname.
func hugeService(t testing.TB, twin bool) (*object.StoredService, []*object.StoredSlice, [2]*object.StoredSlice) {
	var svcPorts []api.ServicePort
	var slicePorts []discovery.EndpointPort
	for p := range 100 {
		svcPorts = append(svcPorts, k8stest.TCP("p"+strconv.Itoa(p), int32(8000+p)))
		slicePorts = append(slicePorts, k8stest.SlicePort("p"+strconv.Itoa(p), "TCP", int32(8000+p)))
	}
	var apiSlices []*discovery.EndpointSlice
	for s := range 5 {
		var eps []k8stest.Endpoint
		for i := range 1000 {
			eps = append(eps, k8stest.Endpoint{Addrs: []string{"10.2" + strconv.Itoa(s) + "." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250+1)}})
		}
		if twin && s == 0 {
			eps[0].Hostname, eps[1].Hostname = "twin", "twin"
		}
		apiSlices = append(apiSlices, k8stest.Slice("prod", "huge", "huge-"+strconv.Itoa(s), discovery.AddressTypeIPv4, slicePorts, eps...))
	}
	changed := apiSlices[3].DeepCopy()
	changed.Endpoints[42].Addresses = []string{"10.99.0.1"}
	svc, sls := stored(t, k8stest.HeadlessService("prod", "huge", svcPorts...), append(apiSlices, changed)...)
	return svc, sls[:5], [2]*object.StoredSlice{sls[3], sls[5]}
}
