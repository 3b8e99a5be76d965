package measure

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
)

// Service is one synthetic service and what DNS should say about it.
type Service struct {
	NS, Name  string
	Headless  bool
	ClusterIP string
	uid       types.UID // the Service's, for the slice's owner reference
	IPs       []string  // endpoint addresses, in slice order
	Hostnames []string  // the endpoint's hostname, or "" (then its DNS name is the dashed address)
}

// FQDN is the service's name in DNS.
func (s *Service) FQDN() string { return s.Name + "." + s.NS + ".svc.cluster.local." }

// EndpointName is the first label of endpoint j's own name.
func (s *Service) EndpointName(j int) string {
	if s.Hostnames[j] != "" {
		return s.Hostnames[j]
	}
	return strings.ReplaceAll(s.IPs[j], ".", "-")
}

// Cluster is the synthetic cluster as created.
type Cluster struct {
	Namespaces []string
	Services   []*Service
	Headless   int
	Endpoints  int
	Objects    int
	Created    time.Duration
	Done       time.Time // when the last object was created
}

// Probe is a name whose A record tells that a server has the cluster, and the address it answers.
type Probe struct{ Name, IP string }

// Probe is the last service created, the probe of the whole cluster.
func (c *Cluster) Probe() Probe {
	for i := len(c.Services) - 1; i >= 0; i-- {
		if s := c.Services[i]; !s.Headless {
			return Probe{s.FQDN(), s.ClusterIP}
		}
	}
	s := c.Services[len(c.Services)-1]
	return Probe{s.FQDN(), s.IPs[0]}
}

// PodIP is the n-th address of the pod range 10.128.0.0/9 (the service range is 10.96.0.0/16).
func PodIP(n int) string {
	base := netip.MustParseAddr("10.128.0.0").As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += uint32(n) + 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// isHeadless spreads the headless services evenly: service i is headless when it crosses a multiple of
// 1/share.
func isHeadless(i int, share float64) bool {
	return int(float64(i+1)*share) > int(float64(i)*share)
}

// Populate creates the namespaces, then every service and its EndpointSlice with cfg.Workers clients
// at once. With at, it stops at each of sizes (service counts, ascending) and calls at with the
// cluster as it is then; the time at takes is not counted as creation time.
func Populate(ctx context.Context, cp *ControlPlane, cfg Spec, sizes []int, at func(*Cluster) error) (*Cluster, error) {
	start := time.Now()
	cl := &Cluster{Endpoints: cfg.Endpoints}
	for i := range cfg.Namespaces {
		name := fmt.Sprintf("ns-%d", i)
		cl.Namespaces = append(cl.Namespaces, name)
		_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	for i := range cfg.Services {
		s := &Service{NS: cl.Namespaces[i%cfg.Namespaces], Name: fmt.Sprintf("svc-%05d", i), Headless: isHeadless(i, cfg.Headless)}
		for j := range cfg.Endpoints {
			s.IPs = append(s.IPs, PodIP(i*cfg.Endpoints+j))
			h := ""
			if s.Headless && j < (cfg.Endpoints+1)/2 {
				h = fmt.Sprintf("host-%d", j)
			}
			s.Hostnames = append(s.Hostnames, h)
		}
		if s.Headless {
			cl.Headless++
		}
		cl.Services = append(cl.Services, s)
	}
	created := time.Since(start) // the namespaces
	all := cl.Services
	cl.Services = nil
	var stops []int
	if at != nil {
		stops = slices.Clone(sizes)
	}
	for _, n := range append(stops, len(all)) {
		t := time.Now()
		if err := create(ctx, cp, cfg, all[len(cl.Services):n], len(all)); err != nil {
			return nil, err
		}
		created += time.Since(t)
		cl.Services = all[:n]
		if n < len(all) {
			if err := at(cl); err != nil {
				return nil, err
			}
		}
	}
	cl.Objects = cfg.Namespaces + 2*len(cl.Services)
	cl.Created, cl.Done = created, time.Now()
	Logf("created %d namespaces, %d services (%d headless), %d EndpointSlices with %d endpoints each in %s (%.0f objects/s)",
		len(cl.Namespaces), len(cl.Services), cl.Headless, len(cl.Services), cfg.Endpoints, cl.Created.Round(time.Millisecond),
		float64(cl.Objects)/cl.Created.Seconds())
	return cl, nil
}

// create makes the services and their EndpointSlices with cfg.Workers clients at once.
func create(ctx context.Context, cp *ControlPlane, cfg Spec, services []*Service, total int) error {
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan *Service)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if err := createService(ctx, cp.Client, s, cfg.ControllerSlices); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
feed:
	for _, s := range services {
		for {
			select {
			case work <- s:
				continue feed
			case <-ctx.Done():
				break feed
			case <-tick.C:
				n := done.Load()
				Logf("created %d/%d services of this step, %d in all (%.0f objects/s)", n, len(services), total, float64(2*n)/time.Since(start).Seconds())
			}
		}
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}

// createService creates s and its EndpointSlice; controllerShaped writes the slice as the
// EndpointSlice controller does (see controllerShape).
func createService(ctx context.Context, c kubernetes.Interface, s *Service, controllerShaped bool) error {
	spec := corev1.ServiceSpec{
		Selector: map[string]string{"app": s.Name},
		Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
		}},
	}
	if s.Headless {
		spec.ClusterIP = corev1.ClusterIPNone
	}
	created, err := c.CoreV1().Services(s.NS).Create(ctx,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.NS}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", s.NS, s.Name, err)
	}
	if !s.Headless {
		s.ClusterIP = created.Spec.ClusterIP
	}
	s.uid = created.UID
	slice, opts := BenchSlice(s, s.IPs, controllerShaped)
	if _, err := c.DiscoveryV1().EndpointSlices(s.NS).Create(ctx, slice, opts); err != nil {
		return fmt.Errorf("endpointslice %s/%s: %w", s.NS, slice.Name, err)
	}
	return nil
}

// BenchSlice is s's one EndpointSlice with the endpoint addresses ips (s.IPs as created; -fleet's
// changes give others), and the options its writer uses.
func BenchSlice(s *Service, ips []string, controllerShaped bool) (*discoveryv1.EndpointSlice, metav1.CreateOptions) {
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name + "-bench", Namespace: s.NS,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: s.Name,
				discoveryv1.LabelManagedBy:   "kubetree-bench",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: Ptr("http"), Protocol: Ptr(corev1.ProtocolTCP), Port: Ptr(int32(8080)),
		}},
	}
	for j, ip := range ips {
		ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if s.Hostnames[j] != "" {
			ep.Hostname = Ptr(s.Hostnames[j])
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	opts := metav1.CreateOptions{}
	if controllerShaped {
		controllerShape(slice, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.NS, UID: s.uid}})
		opts.FieldManager = "kube-controller-manager"
	}
	return slice, opts
}

// controllerShape gives slice, of service svc, what the EndpointSlice controller writes besides the
// addresses: its managed-by label, the last-change-trigger-time annotation, the service as owner,
// and per endpoint the serving and terminating conditions, the node, the zone and the pod (name
// and UID). That is what a list of EndpointSlices carries in a cluster, about 130 bytes an
// endpoint in protobuf, where the addresses alone are about 25.
func controllerShape(slice *discoveryv1.EndpointSlice, svc *corev1.Service) {
	slice.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	slice.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339)}
	slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
		Controller: Ptr(true), BlockOwnerDeletion: Ptr(true)}}
	for j := range slice.Endpoints {
		e := &slice.Endpoints[j]
		e.Conditions.Serving, e.Conditions.Terminating = Ptr(true), Ptr(false)
		e.NodeName = Ptr(fmt.Sprintf("node-%04d", rand.IntN(5000)))
		e.Zone = Ptr(fmt.Sprintf("zone-%c", 'a'+j%3))
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: svc.Namespace,
			Name: fmt.Sprintf("%s-7d9f8b6c5d-%05d", svc.Name, j), UID: uuid.NewUUID()}
	}
}

// Ptr is a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }
