package object

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

// StoredPod is what the pod informer keeps of a Pod.
type StoredPod struct {
	Meta
	addrs    []netip.Addr
	Identity *PodIdentity // shared: namespace and labels
	// hostNetwork pods have the node's addresses: they answer pods verified names, but an address
	// shared by every such pod on a node says nothing about which pod asks.
	hostNetwork bool
	Problems    []Problem
}

// GetObjectKind and DeepCopyObject make a pod decoded slim a runtime.Object, as the reflector wants
// its watch events. It is never changed, so a copy may share everything.
func (p *StoredPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *StoredPod) DeepCopyObject() runtime.Object { c := *p; return &c }

// Addrs are the pod's addresses; none once it has finished.
func (p *StoredPod) Addrs() []netip.Addr { return p.addrs }

// key is the pod's store key: an update arrives as a new object for the same key.
func (p *StoredPod) key() string { return p.Namespace + "/" + p.Name }

// PodIdentity is what a client pod's address tells about it besides its name. It is shared, and
// never changed once made.
type PodIdentity struct {
	Namespace string
	Labels    [][2]string // sorted by name
	// key is the namespace and labels, for sharing; with topology, then nodeSep and the pod's
	// node (Node), so that the identity costs nothing more without it.
	key string
}

// nodeSep ends a key's labels before the node; a printable label cannot hold it.
const nodeSep = "\x01"

// Node is the name of the pod's node, with topology (otherwise, and before the pod is scheduled, "").
func (id *PodIdentity) Node() string {
	if i := strings.LastIndex(id.key, nodeSep); i >= 0 {
		return id.key[i+len(nodeSep):]
	}
	return ""
}

// PodFields are what DNS reads of a Pod, however it was decoded: from an api.Pod (SlimPod), or
// straight from the API server's protobuf (internal/wire's pod codec), which skips the rest of the
// pod. PodStore.Store makes the stored pod of them.
type PodFields struct {
	ObjectFields
	HostNetwork bool
	Phase       string
	IPs         []string
	Labels      [][2]string
	NodeName    string // read with topology only (PodStore.KeepsNode)
}

// PodStore makes the stored pods, sharing one PodIdentity among the pods of a namespace and label
// set (and node, with topology). The pod informer's transform and the pod codec (internal/wire)
// both go through it.
type PodStore struct {
	// keepNode keeps each pod's node (topology): in its identity, which is then per node too.
	keepNode bool
	mu       sync.Mutex
	// identities are weak: an identity lives as long as a stored pod points at it, and its entry
	// goes with it. (Counting references would need every transformed object to reach a handler;
	// a delete event's object does not replace the stored one.)
	identities map[string]weak.Pointer[PodIdentity]
}

// NewPodStore returns a store with no identities yet; keepNode keeps each pod's node (topology).
func NewPodStore(keepNode bool) *PodStore {
	return &PodStore{keepNode: keepNode, identities: map[string]weak.Pointer[PodIdentity]{}}
}

// Store is the one place a pod becomes what the index keeps, however it was decoded. A pod that has finished (Succeeded
// or Failed) keeps its addresses in its status, but the network has released them and another pod
// may already have one: it has no address here.
func (x *PodStore) Store(f *PodFields) *StoredPod {
	s := &StoredPod{Meta: Meta{Name: f.Name, Namespace: f.Namespace, ResourceVersion: f.ResourceVersion},
		hostNetwork: f.HostNetwork}
	m := &meta.ObjectMeta{Name: f.Name, Namespace: f.Namespace, ResourceVersion: f.ResourceVersion}
	bad := problemsIn("pod", m, &s.Problems)
	if f.Phase != string(api.PodSucceeded) && f.Phase != string(api.PodFailed) {
		for _, ip := range f.IPs {
			if addr, ok := ParseIP(ip); ok {
				s.addrs = append(s.addrs, addr)
			} else {
				bad("pod IP %q is not an IP address", ip)
			}
		}
	}
	labels := f.Labels[:0:0]
	for _, l := range f.Labels {
		if !printable(l[0]) || !printable(l[1]) {
			bad("label %q=%q is not printable text", l[0], l[1])
			continue
		}
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	node := ""
	if x.keepNode {
		node = f.NodeName
	}
	s.Identity = x.intern(f.Namespace, labels, node)
	s.Namespace = s.Identity.Namespace // one string per namespace, not per pod
	return s
}

// KeepsNode reports whether the store keeps each pod's node (topology): a decoder need not read it
// otherwise.
func (x *PodStore) KeepsNode() bool { return x.keepNode }

// SlimPod is the pod informer's transform for pods decoded in full (client-go's fake clientset, or
// an API server that answers JSON).
func (x *PodStore) SlimPod(obj any) (any, error) {
	p, ok := obj.(*api.Pod)
	if !ok {
		return obj, nil // a tombstone, or decoded slim already
	}
	f := &PodFields{ObjectFields: ObjectFields{Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion},
		HostNetwork: p.Spec.HostNetwork, Phase: string(p.Status.Phase)}
	if x.keepNode {
		f.NodeName = p.Spec.NodeName
	}
	for _, ip := range p.Status.PodIPs {
		f.IPs = append(f.IPs, ip.IP)
	}
	if len(f.IPs) == 0 && p.Status.PodIP != "" {
		f.IPs = []string{p.Status.PodIP}
	}
	for k, v := range p.Labels {
		f.Labels = append(f.Labels, [2]string{k, v})
	}
	return x.Store(f), nil
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

// intern returns the shared identity of a namespace and label set (and node, with keepNode).
func (x *PodStore) intern(namespace string, labels [][2]string, node string) *PodIdentity {
	var b strings.Builder
	b.WriteString(namespace)
	for _, l := range labels {
		b.WriteByte(0)
		b.WriteString(l[0])
		b.WriteByte('=')
		b.WriteString(l[1])
	}
	if x.keepNode {
		b.WriteString(nodeSep)
		b.WriteString(node)
	}
	key := b.String()
	x.mu.Lock()
	defer x.mu.Unlock()
	if id := x.identities[key].Value(); id != nil {
		return id
	}
	id := &PodIdentity{Namespace: namespace, Labels: labels, key: key}
	x.identities[key] = weak.Make(id)
	goruntime.AddCleanup(id, x.forget, key)
	return id
}

// forget drops the entry of an identity that no pod holds any more, unless a new one has taken
// its key since.
func (x *PodStore) forget(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.identities[key].Value() == nil {
		delete(x.identities, key)
	}
}

// identityCount counts the shared identities, for tests that check they go with their pods.
func (x *PodStore) identityCount() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.identities)
}

// PodDiffers reports whether two versions of a pod differ in what the index keeps.
func PodDiffers(old, new any) bool {
	a, ok1 := old.(*StoredPod)
	b, ok2 := new.(*StoredPod)
	return !ok1 || !ok2 || a.hostNetwork != b.hostNetwork || a.Identity != b.Identity || !slices.Equal(a.addrs, b.addrs)
}
