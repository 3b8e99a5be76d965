package kubetree

import (
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode"
	"weak"

	api "k8s.io/api/core/v1"
)

// With pods verified, kubetree knows which pod has which address: the client identity that
// pods verified, autopath and metadata all need. Pods are the most numerous objects of a cluster,
// so what is kept of one is small: its name, its addresses, and a pointer to a label set shared by
// every pod with the same namespace and labels (a Deployment's pods share one).

// storedPod is what the pod informer keeps of a Pod.
type storedPod struct {
	storedMeta
	addrs    []netip.Addr
	identity *podIdentity // shared: namespace, labels, search paths
	// hostNetwork pods have the node's addresses: they answer pods verified names, but an address
	// shared by every such pod on a node says nothing about which pod asks.
	hostNetwork bool
	problems    []problem
}

// podIdentity is what a client pod's address tells about it besides its name. It is shared, and
// never changed once made.
type podIdentity struct {
	namespace string
	labels    [][2]string // sorted by name
	key       string      // namespace and labels, for sharing
	search    [][]string  // the namespace's search path in each forward zone, for autopath
}

// slimPod is the pod informer's transform. A pod that has finished (Succeeded or Failed) keeps its
// addresses in its status, but the network has released them and another pod may already have one:
// it has no address here.
func (x *podIndex) slimPod(obj any) (any, error) {
	p, ok := obj.(*api.Pod)
	if !ok {
		return obj, nil // a tombstone, or already slim
	}
	s := &storedPod{storedMeta: metaOf(&p.ObjectMeta), hostNetwork: p.Spec.HostNetwork}
	bad := problemsIn("pod", &p.ObjectMeta, &s.problems)
	if p.Status.Phase != api.PodSucceeded && p.Status.Phase != api.PodFailed {
		for _, ip := range p.Status.PodIPs {
			if addr, ok := parseIP(ip.IP); ok {
				s.addrs = append(s.addrs, addr)
			} else {
				bad("pod IP %q is not an IP address", ip.IP)
			}
		}
	}
	labels := make([][2]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		if !printable(k) || !printable(v) {
			bad("label %q=%q is not printable text", k, v)
			continue
		}
		labels = append(labels, [2]string{k, v})
	}
	slices.SortFunc(labels, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	s.identity = x.intern(p.Namespace, labels)
	return s, nil
}

// printable reports whether s is text that other plugins may log or match on: no control
// characters, nothing invisible.
func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// podIndex finds pods by address. Its handlers run on the pod informer's goroutine; queries read it
// under the read lock.
type podIndex struct {
	mu     sync.RWMutex
	byAddr map[netip.Addr]*storedPod
	// more holds the other live pods of an address that more than one pod claims: hostNetwork
	// pods, or a pod whose address was given to a new pod before its own deletion arrived.
	more map[netip.Addr][]*storedPod

	forward    []string // the forward zones, and the host's search path after them, for autopath
	hostSearch []string

	internMu sync.Mutex
	// identities are weak: an identity lives as long as a stored pod points at it, and its entry
	// goes with it. (Counting references would need every transformed object to reach a handler;
	// a delete event's object does not replace the stored one.)
	identities map[string]weak.Pointer[podIdentity]
	searches   map[string][][]string // by namespace
}

func newPodIndex(forward, hostSearch []string) *podIndex {
	return &podIndex{byAddr: map[netip.Addr]*storedPod{}, more: map[netip.Addr][]*storedPod{},
		forward: forward, hostSearch: hostSearch,
		identities: map[string]weak.Pointer[podIdentity]{}, searches: map[string][][]string{}}
}

// searchOf returns a namespace's search paths, one per forward zone, as the in-tree plugin's
// autopath builds them: <ns>.svc.<zone>, svc.<zone>, <zone>, the host's search path, and "" (the
// name as asked). Made once per namespace; autopath only reads them. The caller holds internMu.
func (x *podIndex) searchOf(ns string) [][]string {
	if s, ok := x.searches[ns]; ok {
		return s
	}
	out := make([][]string, len(x.forward))
	for i, zone := range x.forward {
		path := []string{ns + ".svc." + zone, "svc." + zone, zone}
		path = append(path, x.hostSearch...)
		out[i] = append(path, "")
	}
	x.searches[ns] = out
	return out
}

// intern returns the shared identity of a namespace and label set.
func (x *podIndex) intern(namespace string, labels [][2]string) *podIdentity {
	var b strings.Builder
	b.WriteString(namespace)
	for _, l := range labels {
		b.WriteByte(0)
		b.WriteString(l[0])
		b.WriteByte('=')
		b.WriteString(l[1])
	}
	key := b.String()
	x.internMu.Lock()
	defer x.internMu.Unlock()
	if id := x.identities[key].Value(); id != nil {
		return id
	}
	id := &podIdentity{namespace: namespace, labels: labels, key: key, search: x.searchOf(namespace)}
	x.identities[key] = weak.Make(id)
	runtime.AddCleanup(id, x.forget, key)
	return id
}

// forget drops the entry of an identity that no pod holds any more, unless a new one has taken
// its key since.
func (x *podIndex) forget(key string) {
	x.internMu.Lock()
	defer x.internMu.Unlock()
	if x.identities[key].Value() == nil {
		delete(x.identities, key)
	}
}

// replace swaps a pod's addresses: old (nil for a new pod) for p (nil for a deleted one).
func (x *podIndex) replace(old, p *storedPod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old != nil {
		for _, a := range old.addrs {
			x.remove(a, old)
		}
	}
	if p != nil {
		for _, a := range p.addrs {
			x.add(a, p)
		}
	}
}

func (x *podIndex) add(a netip.Addr, p *storedPod) {
	if x.byAddr[a] == nil {
		x.byAddr[a] = p
		return
	}
	x.more[a] = append(x.more[a], p)
}

func (x *podIndex) remove(a netip.Addr, p *storedPod) {
	rest := slices.DeleteFunc(slices.Clone(x.more[a]), func(o *storedPod) bool { return o.key() == p.key() })
	if first := x.byAddr[a]; first != nil && first.key() == p.key() {
		if len(rest) == 0 {
			delete(x.byAddr, a)
			delete(x.more, a)
			return
		}
		x.byAddr[a], rest = rest[0], rest[1:]
	}
	if len(rest) == 0 {
		delete(x.more, a)
	} else {
		x.more[a] = rest
	}
}

// key is the pod's store key: an update arrives as a new object for the same key.
func (p *storedPod) key() string { return p.Namespace + "/" + p.Name }

// inNamespace reports whether a pod of namespace ns has address a: pods verified.
func (x *podIndex) inNamespace(a netip.Addr, ns string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.byAddr[a]
	if p == nil {
		return false
	}
	if equalFoldASCII(ns, p.identity.namespace) {
		return true
	}
	for _, o := range x.more[a] {
		if equalFoldASCII(ns, o.identity.namespace) {
			return true
		}
	}
	return false
}

// client returns the pod that has address a, when exactly one pod that is not on the host's
// network has it: an address two pods claim identifies neither.
func (x *podIndex) client(a netip.Addr) *storedPod {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.byAddr[a]
	if p == nil || p.hostNetwork || len(x.more[a]) > 0 {
		return nil
	}
	return p
}

// sizes are the index's entry counts (addresses, addresses with several pods, shared identities),
// for tests that check removal.
func (x *podIndex) sizes() [3]int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	x.internMu.Lock()
	defer x.internMu.Unlock()
	return [3]int{len(x.byAddr), len(x.more), len(x.identities)}
}
