package kubetree

import (
	"net/netip"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"unicode"
	"weak"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	hostNetwork      bool
	initialEventsEnd bool
	problems         []problem
}

// GetObjectMeta implements meta.ObjectMetaAccessor, with the annotation of the bookmark that ends
// a streamed list, which the reflector looks for.
func (p *storedPod) GetObjectMeta() meta.Object {
	m := p.storedMeta.GetObjectMeta()
	if p.initialEventsEnd {
		m.SetAnnotations(map[string]string{meta.InitialEventsAnnotationKey: "true"})
	}
	return m
}

// GetObjectKind and DeepCopyObject make a pod decoded slim a runtime.Object, as the reflector wants
// its watch events. It is never changed, so a copy may share everything.
func (p *storedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *storedPod) DeepCopyObject() runtime.Object { c := *p; return &c }

// podIdentity is what a client pod's address tells about it besides its name. It is shared, and
// never changed once made.
type podIdentity struct {
	namespace string
	labels    [][2]string // sorted by name
	key       string      // namespace and labels, for sharing
	search    [][]string  // the namespace's search path in each forward zone, for autopath
}

// podFields are what DNS reads of a Pod, however it was decoded: from an api.Pod (slimPod), or
// straight from the API server's protobuf (podCodec), which skips the rest of the pod.
type podFields struct {
	objectFields
	hostNetwork bool
	phase       string
	ips         []string
	labels      [][2]string
}

// store is the one place a pod becomes what the index keeps. A pod that has finished (Succeeded
// or Failed) keeps its addresses in its status, but the network has released them and another pod
// may already have one: it has no address here.
func (x *podIndex) store(f *podFields) *storedPod {
	s := &storedPod{storedMeta: storedMeta{Name: f.name, Namespace: f.namespace, ResourceVersion: f.resourceVersion},
		hostNetwork: f.hostNetwork, initialEventsEnd: f.initialEventsEnd}
	m := &meta.ObjectMeta{Name: f.name, Namespace: f.namespace, ResourceVersion: f.resourceVersion}
	bad := problemsIn("pod", m, &s.problems)
	if f.phase != string(api.PodSucceeded) && f.phase != string(api.PodFailed) {
		for _, ip := range f.ips {
			if addr, ok := parseIP(ip); ok {
				s.addrs = append(s.addrs, addr)
			} else {
				bad("pod IP %q is not an IP address", ip)
			}
		}
	}
	labels := f.labels[:0:0]
	for _, l := range f.labels {
		if !printable(l[0]) || !printable(l[1]) {
			bad("label %q=%q is not printable text", l[0], l[1])
			continue
		}
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	s.identity = x.intern(f.namespace, labels)
	s.Namespace = s.identity.namespace // one string per namespace, not per pod
	return s
}

// slimPod is the pod informer's transform for pods decoded in full (client-go's fake clientset, or
// an API server that answers JSON).
func (x *podIndex) slimPod(obj any) (any, error) {
	p, ok := obj.(*api.Pod)
	if !ok {
		return obj, nil // a tombstone, or decoded slim already
	}
	f := &podFields{objectFields: objectFields{name: p.Name, namespace: p.Namespace, resourceVersion: p.ResourceVersion},
		hostNetwork: p.Spec.HostNetwork, phase: string(p.Status.Phase)}
	for _, ip := range p.Status.PodIPs {
		f.ips = append(f.ips, ip.IP)
	}
	if len(f.ips) == 0 && p.Status.PodIP != "" {
		f.ips = []string{p.Status.PodIP}
	}
	for k, v := range p.Labels {
		f.labels = append(f.labels, [2]string{k, v})
	}
	return x.store(f), nil
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
	goruntime.AddCleanup(id, x.forget, key)
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

// podDiffers reports whether two versions of a pod differ in what the index keeps.
func podDiffers(old, new any) bool {
	a, ok1 := old.(*storedPod)
	b, ok2 := new.(*storedPod)
	return !ok1 || !ok2 || a.hostNetwork != b.hostNetwork || a.identity != b.identity || !slices.Equal(a.addrs, b.addrs)
}
