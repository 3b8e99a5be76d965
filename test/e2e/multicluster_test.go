package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/typed/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// The MCS API's ServiceImport CRD, installed once per run from the mcs-api module the in-tree
// plugin is built with (sigs.k8s.io/mcs-api, its embedded config/crd YAML), so the CRD is the
// version the plugins' clients speak.
var mcsInstalled struct {
	once    sync.Once
	err     error
	imports mcsclient.MulticlusterV1alpha1Interface
}

// serviceImports installs the ServiceImport CRD if need be and returns a client for it.
func serviceImports(t testing.TB) mcsclient.MulticlusterV1alpha1Interface {
	t.Helper()
	mcsInstalled.once.Do(func() { mcsInstalled.imports, mcsInstalled.err = installServiceImports() })
	if mcsInstalled.err != nil {
		t.Fatal(mcsInstalled.err)
	}
	return mcsInstalled.imports
}

func installServiceImports() (mcsclient.MulticlusterV1alpha1Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.vars["KUBECONFIG"])
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(mcscrd.ServiceImportCRD, &crd.Object); err != nil {
		return nil, err
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crds).Create(bg, crd, meta.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the ServiceImport CRD: %w", err)
	}
	imports, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Established: the API server serves the resource.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := imports.ServiceImports("default").List(bg, meta.ListOptions{})
		if err == nil {
			return imports, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("ServiceImports not served 30s after the CRD: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func createImport(t testing.TB, c mcsclient.MulticlusterV1alpha1Interface, ns, name string, kind mcs.ServiceImportType, ips ...string) {
	t.Helper()
	si := k8stest.ServiceImport(ns, name, kind, ips, mcs.ServicePort{Name: "http", Protocol: api.ProtocolTCP, Port: 80})
	if _, err := c.ServiceImports(ns).Create(bg, si, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.ServiceImports(ns).Delete(bg, name, meta.DeleteOptions{}) })
}

// TestMulticlusterSameAsKubernetes: with `multicluster clusterset.local`, kubetree answers the
// clusterset names of ServiceImports as the in-tree plugin does (ClusterSetIP and headless imports,
// endpoints by <hostname>.<cluster>, SRV), and a Service of the same name keeps its cluster.local
// name.
func TestMulticlusterSameAsKubernetes(t *testing.T) {
	imports := serviceImports(t)
	ns := newNamespace(t, "multicluster")
	web := createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	http := k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80))
	createImport(t, imports, ns, "web", mcs.ClusterSetIP, "10.97.0.10")
	applySlice(t, k8stest.ImportSlice(ns, "web", "east", "web-east", discovery.AddressTypeIPv4, http,
		k8stest.Endpoint{Addrs: []string{"10.244.9.1"}}))
	createImport(t, imports, ns, "db", mcs.Headless)
	applySlice(t, k8stest.ImportSlice(ns, "db", "east", "db-east", discovery.AddressTypeIPv4, http,
		k8stest.Endpoint{Addrs: []string{"10.244.9.2"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.9.3"}},
		k8stest.Endpoint{Addrs: []string{"10.244.9.9"}, NotReady: true}))
	applySlice(t, k8stest.ImportSlice(ns, "db", "west", "db-west", discovery.AddressTypeIPv4, http,
		k8stest.Endpoint{Addrs: []string{"10.244.9.4"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.244.9.5"}, Hostname: "db-1"}))
	applySlice(t, k8stest.ImportSlice(ns, "db", "west", "db-west-v6", discovery.AddressTypeIPv6, http,
		k8stest.Endpoint{Addrs: []string{"fd00::9:7"}}))
	// A hostname with two addresses (SRV weights differ there: see the README's Differences).
	createImport(t, imports, ns, "pair", mcs.Headless)
	applySlice(t, k8stest.ImportSlice(ns, "pair", "west", "pair-west", discovery.AddressTypeIPv4, http,
		k8stest.Endpoint{Addrs: []string{"10.244.9.5"}, Hostname: "dup"},
		k8stest.Endpoint{Addrs: []string{"10.244.9.6"}, Hostname: "dup"}))

	p := startPairIn(t, []string{"clusterset.local"}, nil, "multicluster clusterset.local")
	cs := func(name string) string { return fmt.Sprintf("%s.%s.svc.clusterset.local.", name, ns) }
	p.waitAnswer(t, cs("db"), dns.TypeA, "10.244.9.2", "10.244.9.3", "10.244.9.4", "10.244.9.5")
	p.waitAnswer(t, cs("pair"), dns.TypeA, "10.244.9.5", "10.244.9.6")
	p.waitAnswer(t, cs("db"), dns.TypeAAAA, "fd00::9:7")
	p.waitAnswer(t, cs("web"), dns.TypeA, "10.97.0.10")
	p.waitAnswer(t, svcName(ns, "web"), dns.TypeA, web.Spec.ClusterIP)

	questions := []struct {
		name  string
		qtype uint16
	}{
		{cs("web"), dns.TypeA},
		{cs("web"), dns.TypeAAAA},
		{cs("web"), dns.TypeSRV},
		{"_http._tcp." + cs("web"), dns.TypeSRV},
		{"10-244-9-1.east." + cs("web"), dns.TypeA},
		{svcName(ns, "web"), dns.TypeA},
		{cs("db"), dns.TypeA},
		{cs("db"), dns.TypeAAAA},
		{cs("db"), dns.TypeSRV},
		{"_http._tcp." + cs("db"), dns.TypeSRV},
		{"db-0.east." + cs("db"), dns.TypeA},
		{"db-0.west." + cs("db"), dns.TypeA},
		{"db-1.west." + cs("db"), dns.TypeA},
		{"dup.west." + cs("pair"), dns.TypeA},
		{cs("pair"), dns.TypeA},
		{"10-244-9-3.east." + cs("db"), dns.TypeA},
		{"fd00--9-7.west." + cs("db"), dns.TypeAAAA},
		{"db-0." + cs("db"), dns.TypeA},               // no cluster: NXDOMAIN in both
		{"dup.east." + cs("db"), dns.TypeA},           // the wrong cluster
		{"10-244-9-9.east." + cs("db"), dns.TypeA},    // not ready
		{"_http._udp." + cs("db"), dns.TypeSRV},       // no such port
		{svcName(ns, "db"), dns.TypeA},                // an import has no cluster.local name
		{cs("missing"), dns.TypeA},                    // no such import
		{ns + ".svc.clusterset.local.", dns.TypeA},    // the namespace: NODATA
		{"nosuchns.svc.clusterset.local.", dns.TypeA}, // no such namespace
		{"clusterset.local.", dns.TypeSOA},
	}
	for _, q := range questions {
		for _, network := range []string{"udp", "tcp"} {
			p.same(t, network, q.name, q.qtype)
		}
	}

	// A change: an endpoint leaves, an import goes; both plugins follow.
	applySlice(t, k8stest.ImportSlice(ns, "db", "west", "db-west", discovery.AddressTypeIPv4, http,
		k8stest.Endpoint{Addrs: []string{"10.244.9.4"}, Hostname: "db-0"}))
	p.waitAnswer(t, cs("db"), dns.TypeA, "10.244.9.2", "10.244.9.3", "10.244.9.4")
	if err := imports.ServiceImports(ns).Delete(bg, "web", meta.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.both() {
		c.waitRcode(t, cs("web"), dns.TypeA, dns.RcodeNameError)
	}
	for _, q := range []string{cs("web"), "db-1.west." + cs("db"), cs("db")} {
		p.same(t, "udp", q, dns.TypeA)
	}
	p.same(t, "udp", svcName(ns, "web"), dns.TypeA)
}
