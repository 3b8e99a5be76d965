package plugintest

import (
	"context"
	"fmt"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/kubernetes/object"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The in-tree kubernetes plugin serving the same objects as a test's kubetree, for the tests that
// compare the two.

// InTreeHandler is the in-tree plugin of stanza serving objs (which it empties).
func InTreeHandler(t testing.TB, stanza string, objs []runtime.Object) plugin.Handler {
	ctl := caddy.NewTestController("dns", stanza)
	ctl.Next() // to the directive, as the in-tree setup does before ParseStanza
	k, err := kubernetes.ParseStanza(ctl)
	if err != nil {
		t.Fatal(err)
	}
	k.APIConn = newInTreeIndex(t, objs)
	k.Next = test.NextHandler(dns.RcodeRefused, nil)
	return k
}

// inTreeIndex stands in for the in-tree plugin's informer-backed controller.
type inTreeIndex struct {
	services  []*object.Service
	endpoints []*object.Endpoints
	svcByKey  map[string][]*object.Service
	svcByIP   map[string][]*object.Service
	epByKey   map[string][]*object.Endpoints
	epByIP    map[string][]*object.Endpoints
	ns        map[string]*object.Namespace
}

// newInTreeIndex converts objs as the in-tree plugin's informers do; the conversions empty what they
// are given, so objs must not be used afterwards.
func newInTreeIndex(t testing.TB, objs []runtime.Object) *inTreeIndex {
	x := &inTreeIndex{svcByKey: map[string][]*object.Service{}, svcByIP: map[string][]*object.Service{},
		epByKey: map[string][]*object.Endpoints{}, epByIP: map[string][]*object.Endpoints{}, ns: map[string]*object.Namespace{}}
	for _, o := range objs {
		m, ok := o.(meta.Object)
		if !ok {
			t.Fatalf("%T is not an object", o)
		}
		switch o.(type) {
		case *api.Service:
			c, _ := object.ToService(m)
			s := c.(*object.Service)
			x.services = append(x.services, s)
			x.svcByKey[object.ServiceKey(s.Name, s.Namespace)] = append(x.svcByKey[object.ServiceKey(s.Name, s.Namespace)], s)
			for _, ip := range s.ClusterIPs {
				x.svcByIP[ip] = append(x.svcByIP[ip], s)
			}
		case *discovery.EndpointSlice:
			c, _ := object.EndpointSliceToEndpoints(m)
			e := c.(*object.Endpoints)
			x.endpoints = append(x.endpoints, e)
			x.epByKey[e.Index] = append(x.epByKey[e.Index], e)
			for _, ss := range e.Subsets {
				for _, a := range ss.Addresses {
					x.epByIP[a.IP] = append(x.epByIP[a.IP], e)
				}
			}
		case *api.Namespace:
			name := m.GetName() // the conversion empties the object it is given
			c, _ := object.ToNamespace(m)
			x.ns[name] = c.(*object.Namespace)
		}
	}
	return x
}

func (x *inTreeIndex) ServiceList() []*object.Service                   { return x.services }
func (x *inTreeIndex) EndpointsList() []*object.Endpoints               { return x.endpoints }
func (x *inTreeIndex) ServiceImportList() []*object.ServiceImport       { return nil }
func (x *inTreeIndex) SvcIndex(k string) []*object.Service              { return x.svcByKey[k] }
func (x *inTreeIndex) SvcIndexReverse(ip string) []*object.Service      { return x.svcByIP[ip] }
func (x *inTreeIndex) SvcExtIndexReverse(string) []*object.Service      { return nil }
func (x *inTreeIndex) SvcImportIndex(string) []*object.ServiceImport    { return nil }
func (x *inTreeIndex) PodIndex(string) []*object.Pod                    { return nil }
func (x *inTreeIndex) EpIndex(k string) []*object.Endpoints             { return x.epByKey[k] }
func (x *inTreeIndex) EpIndexReverse(ip string) []*object.Endpoints     { return x.epByIP[ip] }
func (x *inTreeIndex) McEpIndex(string) []*object.MultiClusterEndpoints { return nil }
func (x *inTreeIndex) GetNodeByName(context.Context, string) (*api.Node, error) {
	return nil, fmt.Errorf("no nodes")
}
func (x *inTreeIndex) GetNamespaceByName(name string) (*object.Namespace, error) {
	if n, ok := x.ns[name]; ok {
		return n, nil
	}
	return nil, fmt.Errorf("namespace %s not found", name)
}
func (x *inTreeIndex) Run()                                   {}
func (x *inTreeIndex) HasSynced() bool                        { return true }
func (x *inTreeIndex) Stop() error                            { return nil }
func (x *inTreeIndex) Modified(kubernetes.ModifiedMode) int64 { return 3 }
