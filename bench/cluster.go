package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
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
	"k8s.io/client-go/tools/clientcmd"
)

// controlPlane is etcd + kube-apiserver run by hack/cluster.sh in dir.
type controlPlane struct {
	root, dir  string
	kubeconfig string
	version    string
	client     kubernetes.Interface
	started    bool
}

func (cp *controlPlane) start(ctx context.Context) error {
	cp.started = true
	// Not bound to ctx: cluster.sh has its own time limit, and killing it half way would leave
	// daemons that `stop` might not find. An interrupt is acted on right after.
	out, err := exec.Command(filepath.Join(cp.root, "hack/cluster.sh"), "start", cp.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/cluster.sh start: %v\n%s", err, out)
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	env := readEnv(filepath.Join(cp.dir, "env"))
	cp.kubeconfig = env["KUBECONFIG"]
	if cp.kubeconfig == "" {
		return fmt.Errorf("%s/env has no KUBECONFIG", cp.dir)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cp.kubeconfig)
	if err != nil {
		return err
	}
	// Creating thousands of objects: lift client-go's default 5 QPS / 10 burst.
	rc.QPS, rc.Burst = 2000, 4000
	rc.Timeout = 30 * time.Second
	cp.client, err = kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	v, err := cp.client.Discovery().ServerVersion()
	if err != nil {
		return err
	}
	cp.version = v.GitVersion
	logf("control plane up in %s (kube-apiserver %s)", cp.dir, cp.version)
	return nil
}

func (cp *controlPlane) stop() error {
	if !cp.started {
		return nil
	}
	out, err := exec.Command(filepath.Join(cp.root, "hack/cluster.sh"), "stop", cp.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/cluster.sh stop: %v\n%s", err, out)
	}
	return nil
}

func readEnv(path string) map[string]string {
	vars := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return vars
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			vars[k] = strings.Trim(v, `"'`)
		}
	}
	return vars
}

// svc is one synthetic service and what DNS should say about it.
type svc struct {
	ns, name  string
	headless  bool
	clusterIP string
	uid       types.UID // the Service's, for the slice's owner reference
	ips       []string  // endpoint addresses, in slice order
	hostnames []string  // the endpoint's hostname, or "" (then its DNS name is the dashed address)
}

func (s *svc) fqdn() string { return s.name + "." + s.ns + ".svc.cluster.local." }

// endpointName is the first label of endpoint j's own name.
func (s *svc) endpointName(j int) string {
	if s.hostnames[j] != "" {
		return s.hostnames[j]
	}
	return strings.ReplaceAll(s.ips[j], ".", "-")
}

// cluster is the synthetic cluster as created.
type cluster struct {
	namespaces []string
	services   []*svc
	headless   int
	endpoints  int
	objects    int
	created    time.Duration
	done       time.Time // when the last object was created
}

// probe is the service whose A record tells that a server has the cluster: the last one created.
func (c *cluster) probe() struct{ name, ip string } {
	for i := len(c.services) - 1; i >= 0; i-- {
		if s := c.services[i]; !s.headless {
			return struct{ name, ip string }{s.fqdn(), s.clusterIP}
		}
	}
	s := c.services[len(c.services)-1]
	return struct{ name, ip string }{s.fqdn(), s.ips[0]}
}

// podIP is the n-th address of the pod range 10.128.0.0/9 (the service range is 10.96.0.0/16).
func podIP(n int) string {
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

// populate creates the namespaces, then every service and its EndpointSlice with cfg.workers clients
// at once. With at, it stops at each of cfg.sizes (service counts, ascending) and calls at with the
// cluster as it is then; the time at takes is not counted as creation time.
func populate(ctx context.Context, cp *controlPlane, cfg *config, at func(*cluster) error) (*cluster, error) {
	start := time.Now()
	cl := &cluster{endpoints: cfg.endpoints}
	for i := range cfg.namespaces {
		name := fmt.Sprintf("ns-%d", i)
		cl.namespaces = append(cl.namespaces, name)
		_, err := cp.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	for i := range cfg.services {
		s := &svc{ns: cl.namespaces[i%cfg.namespaces], name: fmt.Sprintf("svc-%05d", i), headless: isHeadless(i, cfg.headless)}
		for j := range cfg.endpoints {
			s.ips = append(s.ips, podIP(i*cfg.endpoints+j))
			h := ""
			if s.headless && j < (cfg.endpoints+1)/2 {
				h = fmt.Sprintf("host-%d", j)
			}
			s.hostnames = append(s.hostnames, h)
		}
		if s.headless {
			cl.headless++
		}
		cl.services = append(cl.services, s)
	}
	created := time.Since(start) // the namespaces
	all := cl.services
	cl.services = nil
	var stops []int
	if at != nil {
		stops = slices.Clone(cfg.sizes)
	}
	for _, n := range append(stops, len(all)) {
		t := time.Now()
		if err := create(ctx, cp, cfg, all[len(cl.services):n], len(all)); err != nil {
			return nil, err
		}
		created += time.Since(t)
		cl.services = all[:n]
		if n < len(all) {
			if err := at(cl); err != nil {
				return nil, err
			}
		}
	}
	cl.objects = cfg.namespaces + 2*len(cl.services)
	cl.created, cl.done = created, time.Now()
	logf("created %d namespaces, %d services (%d headless), %d EndpointSlices with %d endpoints each in %s (%.0f objects/s)",
		len(cl.namespaces), len(cl.services), cl.headless, len(cl.services), cfg.endpoints, cl.created.Round(time.Millisecond),
		float64(cl.objects)/cl.created.Seconds())
	return cl, nil
}

// create makes the services and their EndpointSlices with cfg.workers clients at once.
func create(ctx context.Context, cp *controlPlane, cfg *config, services []*svc, total int) error {
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan *svc)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if err := createService(ctx, cp.client, s, cfg.controllerSlices); err != nil {
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
				logf("created %d/%d services of this step, %d in all (%.0f objects/s)", n, len(services), total, float64(2*n)/time.Since(start).Seconds())
			}
		}
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}

// createService creates s and its EndpointSlice; controllerShaped writes the slice as the
// EndpointSlice controller does (see controllerShape).
func createService(ctx context.Context, c kubernetes.Interface, s *svc, controllerShaped bool) error {
	spec := corev1.ServiceSpec{
		Selector: map[string]string{"app": s.name},
		Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
		}},
	}
	if s.headless {
		spec.ClusterIP = corev1.ClusterIPNone
	}
	created, err := c.CoreV1().Services(s.ns).Create(ctx,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.ns}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", s.ns, s.name, err)
	}
	if !s.headless {
		s.clusterIP = created.Spec.ClusterIP
	}
	s.uid = created.UID
	slice, opts := benchSlice(s, s.ips, controllerShaped)
	if _, err := c.DiscoveryV1().EndpointSlices(s.ns).Create(ctx, slice, opts); err != nil {
		return fmt.Errorf("endpointslice %s/%s: %w", s.ns, slice.Name, err)
	}
	return nil
}

// benchSlice is s's one EndpointSlice with the endpoint addresses ips (s.ips as created; -fleet's
// changes give others), and the options its writer uses.
func benchSlice(s *svc, ips []string, controllerShaped bool) (*discoveryv1.EndpointSlice, metav1.CreateOptions) {
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.name + "-bench", Namespace: s.ns,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: s.name,
				discoveryv1.LabelManagedBy:   "kubetree-bench",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080)),
		}},
	}
	for j, ip := range ips {
		ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if s.hostnames[j] != "" {
			ep.Hostname = ptr(s.hostnames[j])
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	opts := metav1.CreateOptions{}
	if controllerShaped {
		controllerShape(slice, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.ns, UID: s.uid}})
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
		Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
	for j := range slice.Endpoints {
		e := &slice.Endpoints[j]
		e.Conditions.Serving, e.Conditions.Terminating = ptr(true), ptr(false)
		e.NodeName = ptr(fmt.Sprintf("node-%04d", rand.IntN(5000)))
		e.Zone = ptr(fmt.Sprintf("zone-%c", 'a'+j%3))
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: svc.Namespace,
			Name: fmt.Sprintf("%s-7d9f8b6c5d-%05d", svc.Name, j), UID: uuid.NewUUID()}
	}
}

func ptr[T any](v T) *T { return &v }

// withControlPlane runs f with a control plane of its own in a temporary directory (prefix names
// it), stopped and removed afterwards whatever f returns (-keep keeps the directory: hack/cluster.sh
// start DIR/cluster brings the same cluster back).
func withControlPlane(ctx context.Context, cfg *config, prefix string, f func(dir string, cp *controlPlane) error) error {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return err
	}
	defer func() {
		if cfg.keep {
			logf("kept %s (control plane state, Corefiles, CoreDNS logs)", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	cp := &controlPlane{root: cfg.root, dir: filepath.Join(dir, "cluster")}
	defer func() {
		logf("stopping the control plane")
		if err := cp.stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	logf("== control plane start")
	if err := cp.start(ctx); err != nil {
		return err
	}
	return f(dir, cp)
}
