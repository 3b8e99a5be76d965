package doctor

import (
	"context"
	"fmt"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The fixtures' names, in the namespace the doctor makes: a ClusterIP service with two named
// ports (dual-stack where the cluster has it), a headless service with one pod of hostname and
// subdomain, an ExternalName that points at the ClusterIP service, and the client pod.
const (
	clusterIPName = "web"
	headlessName  = "hl"
	hostname      = "h1"
	externalName  = "ext"
	clientName    = "client"
	directName    = "direct" // behind NodeLocal DNSCache: the client that asks the cluster DNS past it
)

// fixtures is what the doctor made, as the API server reports it.
type fixtures struct {
	Namespace  string
	ClusterIPs []string // web's, one per family
	PodIP      string   // h1's
	Client     string   // the client pod's name
	Direct     string   // the direct client's name, behind NodeLocal DNSCache ("": none)
}

// makeFixtures creates the namespace and its objects, and waits until the pods run and the
// headless service's EndpointSlice holds h1: an earlier query would get (and a cache keep) an
// NXDOMAIN.
func makeFixtures(ctx context.Context, c kubernetes.Interface, o Options) (*fixtures, error) {
	ns, err := c.CoreV1().Namespaces().Create(ctx, &api.Namespace{ObjectMeta: meta.ObjectMeta{
		GenerateName: "kubetree-doctor-", Labels: map[string]string{"app.kubernetes.io/managed-by": "kubectl-kubetree"},
	}}, meta.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the doctor's namespace: %w", err)
	}
	f := &fixtures{Namespace: ns.Name, Client: clientName}
	for _, s := range fixtureServices(ns.Name, o.Domain) {
		got, err := c.CoreV1().Services(ns.Name).Create(ctx, s, meta.CreateOptions{})
		if err != nil {
			return f, fmt.Errorf("creating Service %s/%s: %w", ns.Name, s.Name, err)
		}
		if s.Name == clusterIPName {
			f.ClusterIPs = got.Spec.ClusterIPs
		}
	}
	pods, direct := o.fixturePods(ns.Name)
	f.Direct = direct
	// A new namespace gets its default ServiceAccount from the controller manager a moment later;
	// until then the API server refuses pods that would run as it.
	wctx, cancel := context.WithTimeout(ctx, o.PodTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(wctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", meta.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return f, fmt.Errorf("namespace %s has no default ServiceAccount (is the controller manager running?): %w", ns.Name, err)
	}
	for _, p := range pods {
		if _, err := c.CoreV1().Pods(ns.Name).Create(ctx, p, meta.CreateOptions{}); err != nil {
			return f, fmt.Errorf("creating pod %s/%s: %w", ns.Name, p.Name, err)
		}
	}
	for _, p := range pods {
		ip, err := waitRunning(wctx, c, ns.Name, p.Name)
		if err != nil {
			return f, err
		}
		if p.Name == hostname {
			f.PodIP = ip
		}
	}
	if err := waitEndpoint(wctx, c, ns.Name, headlessName, f.PodIP); err != nil {
		return f, err
	}
	return f, nil
}

// fixtureServices are the namespace's services: a dual-stack ClusterIP service with a named TCP and
// UDP port, a headless service, and an ExternalName pointing at the first.
func fixtureServices(namespace, domain string) []*api.Service {
	dual := api.IPFamilyPolicyPreferDualStack
	web := &api.Service{ObjectMeta: meta.ObjectMeta{Name: clusterIPName}, Spec: api.ServiceSpec{
		IPFamilyPolicy: &dual,
		Selector:       map[string]string{"app": clusterIPName},
		Ports: []api.ServicePort{
			{Name: "http", Protocol: api.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)},
			{Name: "syslog", Protocol: api.ProtocolUDP, Port: 514, TargetPort: intstr.FromInt32(514)},
		},
	}}
	hl := &api.Service{ObjectMeta: meta.ObjectMeta{Name: headlessName}, Spec: api.ServiceSpec{
		ClusterIP: api.ClusterIPNone,
		Selector:  map[string]string{"app": headlessName},
		Ports:     []api.ServicePort{{Name: "http", Protocol: api.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}},
	}}
	ext := &api.Service{ObjectMeta: meta.ObjectMeta{Name: externalName}, Spec: api.ServiceSpec{
		Type: api.ServiceTypeExternalName, ExternalName: clusterIPName + "." + namespace + ".svc." + domain,
	}}
	return []*api.Service{web, hl, ext}
}

// fixturePods are h1, the headless service's pod of hostname and subdomain, and the client with
// the cluster's DNS policy (or o.DNSConfig), pinned to o.Node; with o.DirectTo, also a client that
// asks that address directly, whose name is returned.
func (o Options) fixturePods(namespace string) (pods []*api.Pod, directClient string) {
	h1 := o.pod(hostname)
	h1.Labels = map[string]string{"app": headlessName}
	h1.Spec.Hostname, h1.Spec.Subdomain = hostname, headlessName
	client := o.pod(clientName)
	if o.DNSConfig != nil {
		conf := o.DNSConfig.DeepCopy()
		conf.Searches = kubeletSearch(namespace, o.Domain)
		client.Spec.DNSPolicy, client.Spec.DNSConfig = api.DNSNone, conf
	}
	o.pin(client)
	pods = []*api.Pod{h1, client}
	if o.DirectTo != "" {
		direct := o.pod(directName)
		direct.Spec.DNSPolicy, direct.Spec.DNSConfig = api.DNSNone, &api.PodDNSConfig{
			Nameservers: []string{o.DirectTo}, Searches: kubeletSearch(namespace, o.Domain),
			Options: []api.PodDNSConfigOption{{Name: "ndots", Value: new(fmt.Sprint(kubeletNdots))}},
		}
		o.pin(direct)
		pods, directClient = append(pods, direct), directName
	}
	return pods, directClient
}

// pod is a pod of the doctor's image, idle until asked by exec, fit for the restricted Pod
// Security level.
func (o Options) pod(name string) *api.Pod {
	no, yes, uid, grace := false, true, int64(65532), int64(0)
	return &api.Pod{
		ObjectMeta: meta.ObjectMeta{Name: name},
		Spec: api.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &api.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid,
				SeccompProfile: &api.SeccompProfile{Type: api.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []api.Container{{
				Name: "dnsq", Image: o.Image, ImagePullPolicy: api.PullIfNotPresent,
				Command: []string{dnsq}, Args: []string{"-t", "sleep"},
				SecurityContext: &api.SecurityContext{
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &api.Capabilities{Drop: []api.Capability{"ALL"}},
				},
			}},
		},
	}
}

// pin puts a client pod on the node the doctor was asked to check from, past its NoSchedule
// taints (a control-plane node's).
func (o Options) pin(p *api.Pod) {
	if o.Node == "" {
		return
	}
	p.Spec.NodeName = o.Node
	p.Spec.Tolerations = []api.Toleration{{Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule}}
}

// waitRunning waits for pod ns/name to run, and returns its address.
func waitRunning(ctx context.Context, c kubernetes.Interface, ns, name string) (string, error) {
	var ip string
	var last *api.Pod
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, meta.GetOptions{})
		if err != nil {
			return false, nil
		}
		last, ip = p, p.Status.PodIP
		return p.Status.Phase == api.PodRunning && ip != "", nil
	})
	if err != nil {
		state := "not created"
		if last != nil {
			state = string(last.Status.Phase)
			for _, s := range last.Status.ContainerStatuses {
				if s.State.Waiting != nil {
					state += ": " + s.State.Waiting.Reason + " " + s.State.Waiting.Message
				}
			}
		}
		return "", fmt.Errorf("pod %s/%s did not run (%s): %w", ns, name, state, err)
	}
	return ip, nil
}

// waitEndpoint waits until an EndpointSlice of service ns/svc holds ip, ready.
func waitEndpoint(ctx context.Context, c kubernetes.Interface, ns, svc, ip string) error {
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, meta.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + svc})
		if err != nil {
			return false, nil
		}
		for _, s := range l.Items {
			for _, e := range s.Endpoints {
				ready := e.Conditions.Ready == nil || *e.Conditions.Ready
				for _, a := range e.Addresses {
					if a == ip && ready {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no EndpointSlice of %s/%s holds %s: %w", ns, svc, ip, err)
	}
	return nil
}
