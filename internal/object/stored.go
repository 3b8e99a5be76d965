package object

import (
	"fmt"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// What the informers keep of each object: its identity (Meta), the model the transforms made of
// it, and the parts of it left out of DNS (Problem).

// Meta is the identity of a stored object; it gives client-go's key functions the name,
// namespace and version through meta.Accessor.
type Meta struct {
	Name, Namespace, ResourceVersion string
}

// StoreName is the object's namespace and name, as the informers' store keeps it: the object's own
// strings, without making a key.
func (m *Meta) StoreName() (namespace, name string) { return m.Namespace, m.Name }

// GetObjectMeta implements meta.ObjectMetaAccessor.
func (m *Meta) GetObjectMeta() meta.Object {
	return &meta.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
}

// StoredService is what the service informer keeps of a Service.
type StoredService struct {
	Meta
	Model    *Service // without slices; nil when the service's name cannot be served
	problems *[]Problem
}

// Problems are the parts of the Service left out of DNS.
func (s *StoredService) Problems() []Problem { return deref(s.problems) }

// problemsRef holds problems through a pointer, nil for none. Most objects have none: a stored
// object takes 16 bytes less, and a slice falls into the next smaller allocation size class.
func problemsRef(problems []Problem) *[]Problem {
	if len(problems) == 0 {
		return nil
	}
	return &problems
}

func deref(p *[]Problem) []Problem {
	if p == nil {
		return nil
	}
	return *p
}

// GetObjectKind and DeepCopyObject make a service decoded slim a runtime.Object, as the reflector
// wants its watch events. It is never changed, so a copy may share everything.
func (s *StoredService) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (s *StoredService) DeepCopyObject() runtime.Object { c := *s; return &c }

// Key is the service's store key, which its slices name through ServiceKey.
func (s *StoredService) Key() string { return s.Namespace + "/" + s.Name }

// StoredSlice is what the endpoint slice informer keeps of an EndpointSlice.
type StoredSlice struct {
	Meta
	Service string // the name of the service it belongs to; "" for none
	// Model is nil for slices DNS does not serve: FQDN, and multicluster without a source cluster
	// that can be a label.
	Model    *EndpointSlice
	problems *[]Problem
	// Triggered is when the change this version of the slice answers happened (the endpoint slice
	// controller's last-change-trigger-time, Unix nanoseconds; 0 when unknown), for the DNS
	// programming latency.
	Triggered int64
}

// Problems are the parts of the EndpointSlice left out of DNS.
func (s *StoredSlice) Problems() []Problem { return deref(s.problems) }

// GetObjectKind and DeepCopyObject make a slice decoded slim a runtime.Object, as the reflector
// wants its watch events. It is never changed, so a copy may share everything.
func (s *StoredSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (s *StoredSlice) DeepCopyObject() runtime.Object { c := *s; return &c }

// StoredNamespace is what the namespace informer keeps of a Namespace: that it exists.
type StoredNamespace struct{ Meta }

// ServiceKey names the service an EndpointSlice belongs to, as a store key; "" if none (or no
// slice).
func (s *StoredSlice) ServiceKey() string {
	if s == nil || s.Service == "" {
		return ""
	}
	return s.Namespace + "/" + s.Service
}

// Problem is a part of an API object that cannot be represented in DNS.
type Problem struct {
	Object  string // "service ns/name" or "endpointslice ns/name"
	Version string // the object's resourceVersion: each version is reported once
	Text    string
}

func problemsIn(kind string, m *meta.ObjectMeta, problems *[]Problem) func(string, ...any) {
	return func(format string, args ...any) {
		*problems = append(*problems, Problem{Object: kind + " " + m.Namespace + "/" + m.Name,
			Version: m.ResourceVersion, Text: fmt.Sprintf(format, args...)})
	}
}

// KeyOf returns the store key of an object or of the tombstone of one.
func KeyOf(obj any) string {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return key
}

// VersionOf returns the resourceVersion of a stored object or of an API object; "" if it has none.
func VersionOf(obj any) string {
	switch o := obj.(type) {
	case interface{ version() string }:
		return o.version()
	case meta.Object:
		return o.GetResourceVersion()
	case meta.ObjectMetaAccessor:
		return o.GetObjectMeta().GetResourceVersion()
	}
	return ""
}

func (m *Meta) version() string { return m.ResourceVersion }
