package kubetree

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// applier writes the cluster into what the handler reads: a service's record sets and reverse
// names, a namespace's names, the apex records and the SOA serial. It knows the tree, the reverse
// index and the record builder, and nothing of client-go. It is the one write path: the watcher's
// single worker, the tests, the fuzzers and the benchmarks all publish through it, one call at a
// time, so it needs no lock of its own.
type applier struct {
	tree       *tree
	reverse    *reverseIndex // nil without reverse zones
	build      *builder
	zones      []zone
	forward    []string // the zones namespaces and pods live in
	svcZones   []string // the zones services live in; the first one owns the reverse names
	clusterset []string // the multicluster zones, which ServiceImports live in
	pods       podMode
	metrics    *serverMetrics

	services int                          // services with a name in the first forward zone
	reported map[string]map[string]string // service key -> object with problems -> version reported
	serial   int64                        // the SOA serial: the second it was last moved to, or one more
	dirty    bool                         // records changed since the serial last moved
	// local are this server's own addresses; dnsServices are the services (by namespace/name) with
	// one of them among their ready endpoints: the cluster DNS Service that this server is behind.
	local       []netip.Addr
	dnsServices map[string]*service
	// behind is where the handlers read both: kubetree_external's nameserver addresses are made
	// from them, as the in-tree plugin gives them to k8s_external.
	behind *atomic.Pointer[dnsBehind]
	// external indexes the services' external IPs (kubetree_external's PTR records).
	external *externalIndex

	// mu is held by whoever writes (the watcher, around each key and the serial move after it) and
	// by a zone transfer while it takes its snapshot: the snapshot sees the records and the SOA
	// serial that names them, never a change whose serial has not moved yet.
	mu sync.Mutex
	// journal keeps the changes behind IXFR, and notify is told of changed zones; both nil unless
	// the transfer plugin is in the server block.
	journal *journal
	notify  *notifier
}

func newApplier(k *Kubetree, m *serverMetrics) *applier {
	return &applier{tree: k.tree, reverse: k.reverse, build: k.build, zones: k.zones, forward: k.forward,
		svcZones: k.svcZones, clusterset: k.cfg.multiclusterZones, pods: k.cfg.podMode, metrics: m,
		reported: map[string]map[string]string{}, dnsServices: map[string]*service{},
		behind: &k.behind, external: k.external}
}

// enableTransfer starts the journal and the notifier, for a server block with the transfer plugin;
// without it neither exists and a change costs nothing more. Serials from before are not journaled:
// a secondary that has one gets a full transfer.
func (a *applier) enableTransfer(notify func(zone string) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.journal = newJournal()
	a.notify = newNotifier(notify)
	a.notify.start()
}

// publishApex publishes what every zone has before the cluster is known: SOA and NS, and in the
// forward zones dns-version and the svc, pod and ns.dns names.
func (a *applier) publishApex() {
	a.serial = time.Now().Unix()
	ps := a.apexes()
	for _, z := range a.forward {
		ps = append(ps,
			placement{z, "dns-version." + z, a.build.dnsVersion(z)},
			placement{z, "svc." + z, nameOnly{}},
			placement{z, "pod." + z, nameOnly{}})
	}
	a.tree.publish(append(ps, a.nameserverAddresses()...)...)
}

// apexes are the SOA and NS records of every zone, with the current serial and nameservers.
func (a *applier) apexes() []placement {
	ps := make([]placement, 0, len(a.zones))
	for _, z := range a.zones {
		ns := a.forward[0]
		if !z.reverse {
			ns = z.name
		}
		ps = append(ps, placement{z.name, z.name, a.build.apex(z.name, uint32(a.serial), a.build.nameservers(ns, a.dnsServices, a.local))})
	}
	return ps
}

// nameserverAddresses are ns.dns.<zone> in every forward zone.
func (a *applier) nameserverAddresses() []placement {
	ps := make([]placement, 0, len(a.forward))
	for _, z := range a.forward {
		ps = append(ps, placement{z, "ns.dns." + z, a.build.nameserverAddresses(z, a.build.nameservers(z, a.dnsServices, a.local))})
	}
	return ps
}

// publishNameserver learns the addresses this server answers on. Until a service has one of them
// among its ready endpoints, they are the nameserver's addresses.
func (a *applier) publishNameserver(ips []net.IP) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.local = a.local[:0]
	for _, ip := range ips {
		if addr, ok := netip.AddrFromSlice(ip); ok {
			a.local = append(a.local, addr.Unmap())
		}
	}
	a.republishNameservers()
}

// noteDNSService keeps track of the services this server is behind, and republishes the
// nameservers when that set or one of its members changes: every replica then names the same
// service addresses, as the in-tree plugin does.
func (a *applier) noteDNSService(key string, model *service) {
	_, was := a.dnsServices[key]
	is := model != nil && model.hasEndpointAt(a.local)
	switch {
	case is:
		a.dnsServices[key] = model
	case was:
		delete(a.dnsServices, key)
	default:
		return
	}
	a.republishNameservers()
}

// republishNameservers publishes every zone's NS records and ns.dns.<zone>; the serial moves after
// the watcher's next key.
func (a *applier) republishNameservers() {
	b := &dnsBehind{local: slices.Clone(a.local)}
	for _, key := range slices.Sorted(maps.Keys(a.dnsServices)) {
		b.services = append(b.services, a.dnsServices[key])
	}
	a.behind.Store(b)
	ps := append(a.apexes(), a.nameserverAddresses()...)
	for _, p := range ps {
		a.journal.before(a, p.zone, p.name)
	}
	a.tree.publish(ps...)
	a.dirty = true
}

// applyService publishes the service stored under key (nil: it is gone) with its slices. exposed
// says whether its namespace exists and may be served; if not, the service has no names.
func (a *applier) applyService(key string, svc *storedService, sls []*storedSlice, exposed bool) {
	start := time.Now()
	ns, name, _ := strings.Cut(key, "/")
	model := a.assembled(key, svc, sls, exposed)
	a.publishService(ns, name, model)
	a.noteDNSService(key, model)
	a.metrics.apply.Observe(time.Since(start).Seconds())
}

// applyImport publishes the ServiceImport stored under key (nil: it is gone) with its
// multicluster slices, in the multicluster zones, as applyService does a service.
func (a *applier) applyImport(key string, si *storedService, sls []*storedSlice, exposed bool) {
	start := time.Now()
	ns, name, _ := strings.Cut(key, "/")
	ps := a.placements(a.clusterset, ns, name, a.assembled(importPrefix+key, si, sls, exposed))
	for _, p := range ps {
		a.journal.before(a, p.zone, p.name)
	}
	a.dirty = true
	a.tree.publish(ps...)
	a.metrics.apply.Observe(time.Since(start).Seconds())
}

// assembled is the model of a stored service (or ServiceImport) with its slices, its problems
// reported under reportKey; nil when it is gone or its namespace is not served.
func (a *applier) assembled(reportKey string, s *storedService, sls []*storedSlice, exposed bool) *service {
	switch {
	case s == nil:
		delete(a.reported, reportKey)
	case exposed:
		model, problems := assemble(s, sls)
		a.report(reportKey, problems)
		return model
	}
	return nil
}

// placements builds the record sets of a service (or ServiceImport) in zones, off to the side.
func (a *applier) placements(zones []string, ns, name string, model *service) []placement {
	ps := make([]placement, len(zones))
	for i, z := range zones {
		ps[i] = placement{zone: z, name: name + "." + ns + ".svc." + z}
		if model == nil {
			continue
		}
		if r := a.build.service(model, z); r != nil {
			ps[i].set = r
		}
	}
	return ps
}

// publishService builds the service's record sets in every service zone, off to the side, and
// swaps them in with its reverse names; a nil model takes the service's names away.
func (a *applier) publishService(ns, name string, model *service) {
	ps := a.placements(a.svcZones, ns, name, model)
	if len(ps) == 0 {
		return // every forward zone is a multicluster zone
	}
	old, _ := a.tree.get(ps[0].zone, ps[0].name).(*svcRecords)
	now, _ := ps[0].set.(*svcRecords)
	if a.journal != nil {
		for _, p := range ps {
			a.journal.before(a, p.zone, p.name)
		}
		a.journal.beforePTR(a, old, now)
	}
	a.dirty = true
	if a.reverse != nil {
		a.reverse.replace(old, now) // before the tree: it numbers now
	}
	a.external.replace(name+"."+ns, old, now)
	a.tree.publish(ps...)
	if old != nil {
		a.services--
	}
	if now != nil {
		a.services++
	}
	a.metrics.services.Set(float64(a.services))
}

// applyNamespace publishes or removes <ns>.svc and, unless pods are disabled, <ns>.pod. The caller
// then applies the namespace's services, which are served only while it exists.
func (a *applier) applyNamespace(ns string, exists bool) {
	var set recordSet
	if exists {
		set = nameOnly{}
	}
	var ps []placement
	for _, z := range a.forward {
		ps = append(ps, placement{z, ns + ".svc." + z, set})
		if a.pods != podsDisabled {
			ps = append(ps, placement{z, ns + ".pod." + z, set})
		}
	}
	a.tree.publish(ps...)
}

// touchSerial moves the SOA serial to the current second after a change, at most once a second:
// a change in the second the serial last moved to waits for the next one, and touchSerial reports
// that (later) so that the caller calls it again then. The serial thus changes whenever the records
// do, stays monotonic, and follows the clock.
func (a *applier) touchSerial() (later bool) {
	if !a.dirty {
		return false
	}
	now := time.Now().Unix()
	if now <= a.serial {
		return true
	}
	a.moveSerial(now)
	return false
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
	a.tree.publish(a.apexes()...)
	if a.journal != nil {
		zones := a.journal.commit(a, uint32(from), uint32(to))
		a.notify.changed(zones)
	}
}

// report logs and counts what could not be represented, once per version of each object: a service
// rebuilt because one of its slices changed does not report its own problems again, and a new
// version of a slice is reported although the service did not change.
func (a *applier) report(key string, problems []problem) {
	if len(problems) == 0 {
		delete(a.reported, key)
		return
	}
	old, now := a.reported[key], map[string]string{}
	var fresh []string
	for _, p := range problems {
		now[p.object] = p.version
		if v, ok := old[p.object]; ok && v == p.version {
			continue
		}
		fresh = append(fresh, fmt.Sprintf("%s (version %s): %s", p.object, p.version, p.text))
	}
	a.reported[key] = now
	if len(fresh) == 0 {
		return
	}
	a.metrics.rejected.Add(float64(len(fresh)))
	log.Warningf("service %s: left out of DNS: %s", key, strings.Join(fresh, "; "))
}

// reportPod logs and counts what of a pod could not be kept; each pod version is reported once
// (the caller sees each version once).
func (a *applier) reportPod(p *storedPod) {
	texts := make([]string, 0, len(p.problems))
	for _, pr := range p.problems {
		texts = append(texts, pr.text)
	}
	a.metrics.rejected.Add(float64(len(p.problems)))
	log.Warningf("pod %s/%s (version %s): left out of the client index: %s", p.Namespace, p.Name, p.ResourceVersion, strings.Join(texts, "; "))
}
