// Package applier is the write side: it writes the cluster, as the watcher hands it over, into what
// the handler reads, and is the only one that does. It knows the model and the records, and nothing
// of client-go. The watcher, the tests, the fuzzers and the benchmarks all publish through it.
package applier

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

	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/kubetree/kubetree/internal/metrics"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"
)

var log = clog.NewWithPlugin("kubetree")

// Indexes are what the applier writes and the handler reads: the tree (a service's record sets, a
// namespace's names, the apex records and the SOA serial), the reverse index, the external-IP
// index, the pod and node indexes, the namespaces isolate_labels selects, and what this server is
// behind.
type Indexes struct {
	Tree     *tree.Tree
	Reverse  *records.ReverseIndex // nil without reverse zones
	External *records.ExternalIndex
	Pods     *object.PodIndex  // nil unless pods verified
	Nodes    *object.NodeIndex // nil without topology
	// Labelled holds the namespaces isolate_labels selects; nil without it.
	Labelled interface {
		SetLabelled(ns string, labelled bool)
	}
	// Behind is where the handlers read what the applier knows of the services this server is
	// behind: kubetree_external's nameserver addresses are made from it, as the in-tree plugin
	// gives them to k8s_external.
	Behind *atomic.Pointer[records.Behind]
}

// Options are what the Corefile says of the zones the applier writes.
type Options struct {
	Zones      []records.ServedZone
	Clusterset []string // the multicluster zones, which ServiceImports live in
	PodNames   bool     // pods is not disabled: a namespace has <ns>.pod.<zone>
	Build      *records.Builder
	Metrics    *metrics.ServerBlock
}

// Applier writes the cluster into its Indexes.
type Applier struct {
	Indexes
	zones      []records.ServedZone
	forward    []string // the zones namespaces and pods live in
	svcZones   []string // the zones services live in; the first one owns the reverse names
	clusterset []string
	podNames   bool
	build      *records.Builder
	metrics    *metrics.ServerBlock

	// mu is held by every write of a record (not by a pod's, a node's or an isolate_labels
	// namespace's, which change no record and which their indexes' own locks guard), and by a zone
	// transfer while it takes its snapshot: the snapshot sees the records and the SOA serial that
	// names them, never a change whose serial has not moved yet.
	mu       sync.Mutex
	services int                          // services with a name in the first forward zone
	reported map[string]map[string]string // service key -> object with problems -> version reported
	serial   int64                        // the SOA serial: the second it was last moved to, or one more
	dirty    bool                         // records changed since the serial last moved
	// serialTimer moves the serial in the next second, after a change in the second it last moved
	// to (serial.go); nil when no move is due.
	serialTimer *time.Timer
	closed      bool
	// local are this server's own addresses; dnsServices are the services (by namespace/name) with
	// one of them among their ready endpoints: the cluster DNS Service that this server is behind.
	local       []netip.Addr
	dnsServices map[string]*object.Service
	// journal keeps the changes behind IXFR, and notify is told of changed zones; both nil unless
	// the transfer plugin is in the server block.
	journal *journal
	notify  *notifier
}

// New returns the applier that writes into ix, with the apex records of every zone published.
func New(ix Indexes, o Options) *Applier {
	a := &Applier{Indexes: ix, zones: o.Zones, clusterset: o.Clusterset, podNames: o.PodNames, build: o.Build, metrics: o.Metrics,
		reported: map[string]map[string]string{}, dnsServices: map[string]*object.Service{}}
	for _, z := range o.Zones {
		if !z.Reverse {
			a.forward = append(a.forward, z.Name)
			if !z.Multicluster {
				a.svcZones = append(a.svcZones, z.Name)
			}
		}
	}
	a.publishApex()
	return a
}

// EnableTransfer starts the journal and the notifier, for a server block with the transfer plugin;
// without it neither exists and a change costs nothing more. Serials from before are not journaled:
// a secondary that has one gets a full transfer.
func (a *Applier) EnableTransfer(notify func(zone string) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.journal = newJournal(a.Tree, a.Reverse, a.build, a.zoneNames())
	a.notify = newNotifier(notify)
	a.notify.start()
}

// zoneNames are the server block's zones by name.
func (a *Applier) zoneNames() []string {
	names := make([]string, len(a.zones))
	for i, z := range a.zones {
		names[i] = z.Name
	}
	return names
}

// Close stops the serial's timer and the notifier; the applier writes nothing after it. It may be
// called more than once.
func (a *Applier) Close() error {
	a.mu.Lock()
	a.closed = true
	if a.serialTimer != nil {
		a.serialTimer.Stop() // it holds the applier, and through it the tree
		a.serialTimer = nil
	}
	n := a.notify
	a.mu.Unlock()
	return n.close()
}

// publishApex publishes what every zone has before the cluster is known: SOA and NS, and in the
// forward zones dns-version and the svc, pod and ns.dns names.
func (a *Applier) publishApex() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.serial = time.Now().Unix()
	ps := a.apexes()
	for _, z := range a.forward {
		ps = append(ps,
			tree.Placement{Zone: z, Name: "dns-version." + z, Set: a.build.DNSVersion(z)},
			tree.Placement{Zone: z, Name: "svc." + z, Set: records.NameOnly{}},
			tree.Placement{Zone: z, Name: "pod." + z, Set: records.NameOnly{}})
	}
	a.Tree.Publish(append(ps, a.nameserverPlacements()...)...)
}

// apexes are the SOA and NS records of every zone, with the current serial and nameservers.
func (a *Applier) apexes() []tree.Placement {
	ps := make([]tree.Placement, 0, len(a.zones))
	for _, z := range a.zones {
		ns := a.forward[0]
		if !z.Reverse {
			ns = z.Name
		}
		nss := a.build.Nameservers(ns, a.dnsServices, a.local)
		ps = append(ps, tree.Placement{Zone: z.Name, Name: z.Name, Set: a.build.ApexSet(z.Name, uint32(a.serial), nss)})
	}
	return ps
}

// nameserverPlacements are ns.dns.<zone> in every forward zone.
func (a *Applier) nameserverPlacements() []tree.Placement {
	ps := make([]tree.Placement, 0, len(a.forward))
	for _, z := range a.forward {
		nss := a.build.Nameservers(z, a.dnsServices, a.local)
		ps = append(ps, tree.Placement{Zone: z, Name: "ns.dns." + z, Set: a.build.NSAddresses(z, nss)})
	}
	return ps
}

// PublishNameserver learns the addresses this server answers on. Until a service has one of them
// among its ready endpoints, they are the nameserver's addresses.
func (a *Applier) PublishNameserver(ips []net.IP) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.local = a.local[:0]
	for _, ip := range ips {
		if addr, ok := netip.AddrFromSlice(ip); ok {
			a.local = append(a.local, addr.Unmap())
		}
	}
	a.republishNameservers()
	a.afterChange()
}

// behindModel is the model by which noteDNSService knows a service this server may be behind: the
// published one; or, for a service whose namespace is not served (the namespaces option leaving out
// kube-system), one assembled for this alone, and only when one of its slices holds one of this
// server's addresses. The in-tree plugin finds its nameservers among every service it watches, so
// the NS records name the cluster DNS Service whichever namespaces are served.
func (a *Applier) behindModel(model *object.Service, svc *object.StoredService, sls []*object.StoredSlice) *object.Service {
	if model != nil || svc == nil || len(a.local) == 0 {
		return model
	}
	for _, sl := range sls {
		if sl.Model != nil && sl.Model.IndexOf(a.local) >= 0 {
			m, _ := object.Assemble(svc, sls)
			return m
		}
	}
	return nil
}

// noteDNSService keeps track of the services this server is behind, and republishes the
// nameservers when that set or one of its members changes: every replica then names the same
// service addresses, as the in-tree plugin does.
func (a *Applier) noteDNSService(key string, model *object.Service) {
	_, was := a.dnsServices[key]
	is := model != nil && model.HasEndpointAt(a.local)
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

// republishNameservers publishes every zone's NS records and ns.dns.<zone>.
func (a *Applier) republishNameservers() {
	b := &records.Behind{Local: slices.Clone(a.local)}
	for _, key := range slices.Sorted(maps.Keys(a.dnsServices)) {
		b.Services = append(b.Services, a.dnsServices[key])
	}
	a.Behind.Store(b)
	a.publish(append(a.apexes(), a.nameserverPlacements()...))
}

// publish journals what the placements replace and swaps them into the tree.
func (a *Applier) publish(ps []tree.Placement) {
	for _, p := range ps {
		a.journal.before(p.Zone, p.Name)
	}
	a.Tree.Publish(ps...)
	a.dirty = true
}

// ApplyService publishes the service stored under key (nil: it is gone) with its slices. exposed
// says whether its namespace exists and may be served; if not, the service has no names.
func (a *Applier) ApplyService(key string, svc *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := time.Now()
	ns, name, _ := strings.Cut(key, "/")
	model := a.assembled(key, svc, sls, exposed)
	a.publishService(ns, name, model)
	a.noteDNSService(key, a.behindModel(model, svc, sls))
	a.afterChange()
	a.metrics.Apply.Observe(time.Since(start).Seconds())
}

// importReportPrefix keeps the reports of a ServiceImport apart from those of a Service of the same
// name.
const importReportPrefix = "serviceimport:"

// ApplyImport publishes the ServiceImport stored under key (nil: it is gone) with its
// multicluster slices, in the multicluster zones, as ApplyService does a service.
func (a *Applier) ApplyImport(key string, si *object.StoredService, sls []*object.StoredSlice, exposed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := time.Now()
	ns, name, _ := strings.Cut(key, "/")
	a.publish(a.placements(a.clusterset, ns, name, a.assembled(importReportPrefix+key, si, sls, exposed)))
	a.afterChange()
	a.metrics.Apply.Observe(time.Since(start).Seconds())
}

// assembled is the model of a stored service (or ServiceImport) with its slices, its problems
// reported under reportKey; nil when it is gone or its namespace is not served.
func (a *Applier) assembled(reportKey string, s *object.StoredService, sls []*object.StoredSlice, exposed bool) *object.Service {
	switch {
	case s == nil:
		delete(a.reported, reportKey)
	case exposed:
		model, problems := object.Assemble(s, sls)
		a.report(reportKey, problems)
		return model
	}
	return nil
}

// placements builds the record sets of a service (or ServiceImport) in zones, off to the side.
func (a *Applier) placements(zones []string, ns, name string, model *object.Service) []tree.Placement {
	ps := make([]tree.Placement, len(zones))
	for i, z := range zones {
		ps[i] = tree.Placement{Zone: z, Name: name + "." + ns + ".svc." + z}
		if model == nil {
			continue
		}
		if r := a.build.BuildService(model, z); r != nil {
			ps[i].Set = r
		}
	}
	return ps
}

// publishService builds the service's record sets in every service zone, off to the side, and
// swaps them in with its reverse names and external IPs; a nil model takes the service's names
// away.
func (a *Applier) publishService(ns, name string, model *object.Service) {
	ps := a.placements(a.svcZones, ns, name, model)
	if len(ps) == 0 {
		return // every forward zone is a multicluster zone
	}
	old, _ := a.Tree.Get(ps[0].Zone, ps[0].Name).(*records.ServiceSet)
	now, _ := ps[0].Set.(*records.ServiceSet)
	a.journal.beforePTR(old, now)
	if a.Reverse != nil {
		a.Reverse.Replace(old, now) // before the tree: it numbers now
	}
	a.External.Replace(name+"."+ns, old, now)
	a.publish(ps)
	if old != nil {
		a.services--
	}
	if now != nil {
		a.services++
	}
	a.metrics.SetServices(a.services)
}

// ApplyNamespace publishes or removes <ns>.svc and, unless pods are disabled, <ns>.pod. The caller
// then applies the namespace's services, which are served only while it exists.
func (a *Applier) ApplyNamespace(ns string, exists bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var set tree.Set
	if exists {
		set = records.NameOnly{}
	}
	var ps []tree.Placement
	for _, z := range a.forward {
		ps = append(ps, tree.Placement{Zone: z, Name: ns + ".svc." + z, Set: set})
		if a.podNames {
			ps = append(ps, tree.Placement{Zone: z, Name: ns + ".pod." + z, Set: set})
		}
	}
	a.Tree.Publish(ps...)
}

// ApplyLabelledNamespace records whether isolate_labels selects namespace ns. Like a pod, it
// changes no record: only who may resolve them, which isolation's own lock guards.
func (a *Applier) ApplyLabelledNamespace(ns string, labelled bool) {
	a.Labelled.SetLabelled(ns, labelled)
}

// ApplyPod swaps a pod's versions in the pod index and reports what of the new one could not be
// kept, once per version. Pod events skip the watcher's queue and the applier's lock: no record
// depends on a pod, so neither the tree nor the serial changes, and the pod index has its own lock.
func (a *Applier) ApplyPod(old, new *object.StoredPod) {
	a.Pods.Replace(old, new)
	if new == nil || len(new.Problems) == 0 || old != nil && old.ResourceVersion == new.ResourceVersion {
		return
	}
	texts := make([]string, 0, len(new.Problems))
	for _, pr := range new.Problems {
		texts = append(texts, pr.Text)
	}
	a.metrics.Rejected.Add(float64(len(new.Problems)))
	log.Warningf("pod %s/%s (version %s): left out of the client index: %s", new.Namespace, new.Name, new.ResourceVersion, strings.Join(texts, "; "))
}

// ApplyNode puts a node's zone in the node index (n nil: takes the node out). Like a pod's, it
// skips the queue and the applier's lock: no record depends on a node, only which of a service's
// records a client gets.
func (a *Applier) ApplyNode(name string, n *object.StoredNode) {
	a.Nodes.Replace(name, n)
}

// report logs and counts what could not be represented, once per version of each object: a service
// rebuilt because one of its slices changed does not report its own problems again, and a new
// version of a slice is reported although the service did not change.
func (a *Applier) report(key string, problems []object.Problem) {
	if len(problems) == 0 {
		delete(a.reported, key)
		return
	}
	old, now := a.reported[key], map[string]string{}
	var fresh []string
	for _, p := range problems {
		now[p.Object] = p.Version
		if v, ok := old[p.Object]; ok && v == p.Version {
			continue
		}
		fresh = append(fresh, fmt.Sprintf("%s (version %s): %s", p.Object, p.Version, p.Text))
	}
	a.reported[key] = now
	if len(fresh) == 0 {
		return
	}
	a.metrics.Rejected.Add(float64(len(fresh)))
	log.Warningf("service %s: left out of DNS: %s", key, strings.Join(fresh, "; "))
}
