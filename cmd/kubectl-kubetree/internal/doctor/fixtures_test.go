package doctor

import (
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// cluster is a fake clientset that does what the API server, the controller manager and the
// kubelet would for the fixtures: names the namespace, gives it its default ServiceAccount, runs
// each pod at an address, and puts h1 in hl's EndpointSlice.
func cluster() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ns := a.(k8stesting.CreateAction).GetObject().(*api.Namespace)
		ns.Name = ns.GenerateName + "x1y2z"
		if err := c.Tracker().Add(ns); err != nil {
			return true, nil, err
		}
		return true, ns, c.Tracker().Add(&api.ServiceAccount{ObjectMeta: meta.ObjectMeta{Namespace: ns.Name, Name: "default"}})
	})
	c.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*api.Service)
		if s.Spec.Type != api.ServiceTypeExternalName && s.Spec.ClusterIP == "" {
			s.Spec.ClusterIPs = []string{"10.96.5.5", "fd00::5"} // a dual-stack cluster
		}
		return false, nil, nil
	})
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*api.Pod)
		p.Status.Phase = api.PodRunning
		p.Status.PodIP = map[string]string{hostname: "10.244.0.9", clientName: "10.244.0.10", directName: "10.244.0.11"}[p.Name]
		if p.Spec.Subdomain == headlessName {
			yes := true
			slice := &discovery.EndpointSlice{
				ObjectMeta: meta.ObjectMeta{Namespace: a.GetNamespace(), Name: headlessName + "-1", Labels: map[string]string{discovery.LabelServiceName: headlessName}},
				Endpoints:  []discovery.Endpoint{{Addresses: []string{p.Status.PodIP}, Hostname: &p.Spec.Hostname, Conditions: discovery.EndpointConditions{Ready: &yes}}},
			}
			if err := c.Tracker().Add(slice); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	return c
}

var options = Options{Domain: "cluster.local", Image: "kubetree/dnsq:1", PodTimeout: 10 * time.Second}

// TestFixtures: the objects hold what the record forms need: named ports, a headless service
// whose pod has the hostname and subdomain, an ExternalName into the cluster; the client pod
// has the cluster's DNS policy.
func TestFixtures(t *testing.T) {
	c := cluster()
	f, err := makeFixtures(bg, c, options)
	if err != nil {
		t.Fatal(err)
	}
	if want := (fixtures{Namespace: "kubetree-doctor-x1y2z", ClusterIPs: []string{"10.96.5.5", "fd00::5"}, PodIP: "10.244.0.9", Client: clientName}); f.Namespace != want.Namespace || f.PodIP != want.PodIP || len(f.ClusterIPs) != 2 {
		t.Errorf("fixtures %+v, want %+v", *f, want)
	}
	svc := func(name string) *api.Service {
		s, err := c.CoreV1().Services(f.Namespace).Get(bg, name, meta.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if web := svc(clusterIPName); len(web.Spec.Ports) != 2 || web.Spec.Ports[0].Name != "http" || web.Spec.Ports[1].Protocol != api.ProtocolUDP ||
		*web.Spec.IPFamilyPolicy != api.IPFamilyPolicyPreferDualStack {
		t.Errorf("web: %+v, want named TCP and UDP ports, dual-stack preferred", web.Spec)
	}
	if hl := svc(headlessName); hl.Spec.ClusterIP != api.ClusterIPNone {
		t.Errorf("hl: ClusterIP %q, want headless", hl.Spec.ClusterIP)
	}
	if ext := svc(externalName); ext.Spec.ExternalName != "web.kubetree-doctor-x1y2z.svc.cluster.local" {
		t.Errorf("ext points at %q, want web's full name", ext.Spec.ExternalName)
	}
	h1, _ := c.CoreV1().Pods(f.Namespace).Get(bg, hostname, meta.GetOptions{})
	if h1.Spec.Hostname != hostname || h1.Spec.Subdomain != headlessName {
		t.Errorf("h1: hostname %q subdomain %q", h1.Spec.Hostname, h1.Spec.Subdomain)
	}
	client, _ := c.CoreV1().Pods(f.Namespace).Get(bg, clientName, meta.GetOptions{})
	if client.Spec.DNSPolicy != "" || client.Spec.DNSConfig != nil {
		t.Errorf("client: dnsPolicy %q, want the default (ClusterFirst)", client.Spec.DNSPolicy)
	}
}

// TestFixturesForAnotherDNS: with a DNS the kubelet does not point pods at, the client gets the
// resolv.conf the kubelet would write for it.
func TestFixturesForAnotherDNS(t *testing.T) {
	c := cluster()
	o := options
	o.DNSConfig = &api.PodDNSConfig{Nameservers: []string{"10.96.7.7"}}
	f, err := makeFixtures(bg, c, o)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := c.CoreV1().Pods(f.Namespace).Get(bg, clientName, meta.GetOptions{})
	conf := client.Spec.DNSConfig
	if client.Spec.DNSPolicy != api.DNSNone || conf == nil || conf.Nameservers[0] != "10.96.7.7" ||
		len(conf.Searches) != 3 || conf.Searches[0] != "kubetree-doctor-x1y2z.svc.cluster.local" {
		t.Errorf("client: dnsPolicy %q, config %+v", client.Spec.DNSPolicy, conf)
	}
}

// TestFixturesBehindNodeLocal: behind NodeLocal DNSCache a second client asks the cluster DNS
// past the cache; the first keeps the cluster's DNS policy.
func TestFixturesBehindNodeLocal(t *testing.T) {
	c := cluster()
	o := options
	o.DirectTo = "10.96.0.10"
	f, err := makeFixtures(bg, c, o)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := c.CoreV1().Pods(f.Namespace).Get(bg, f.Direct, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if conf := direct.Spec.DNSConfig; direct.Spec.DNSPolicy != api.DNSNone || conf == nil || conf.Nameservers[0] != "10.96.0.10" || len(conf.Searches) != 3 {
		t.Errorf("direct: dnsPolicy %q, config %+v, want the cluster DNS's address with the kubelet's search path", direct.Spec.DNSPolicy, conf)
	}
	if client, _ := c.CoreV1().Pods(f.Namespace).Get(bg, clientName, meta.GetOptions{}); client.Spec.DNSPolicy != "" {
		t.Errorf("client: dnsPolicy %q, want the cluster's (ClusterFirst)", client.Spec.DNSPolicy)
	}
}

// TestFixturesOnANode: with --node, the client pods (the direct one behind NodeLocal DNSCache
// too) run on that node, a control plane's taint tolerated; the headless service's pod runs
// wherever the scheduler puts it.
func TestFixturesOnANode(t *testing.T) {
	c := cluster()
	o := options
	o.DirectTo, o.Node = "10.96.0.10", "worker-2"
	f, err := makeFixtures(bg, c, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{clientName, f.Direct} {
		p, _ := c.CoreV1().Pods(f.Namespace).Get(bg, name, meta.GetOptions{})
		if p.Spec.NodeName != "worker-2" || len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Effect != api.TaintEffectNoSchedule {
			t.Errorf("%s: node %q, tolerations %+v, want worker-2 past NoSchedule taints", name, p.Spec.NodeName, p.Spec.Tolerations)
		}
	}
	if h1, _ := c.CoreV1().Pods(f.Namespace).Get(bg, hostname, meta.GetOptions{}); h1.Spec.NodeName != "" {
		t.Errorf("h1 pinned to %q, want the scheduler's choice", h1.Spec.NodeName)
	}
}
