// Package doctor checks a cluster's DNS, whatever serves it, against the Kubernetes DNS
// specification from inside the cluster: it makes a namespace of fixtures and a client pod, asks
// every record form through the pod's own resolver, checks the pod's resolv.conf, and deletes what
// it made.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubetree/kubetree/cmd/kubectl-kubetree/internal/replica"
)

// Options are what the doctor checks, and how.
type Options struct {
	DNS    replica.Service // the Service in front of the cluster DNS
	Domain string          // the cluster domain
	Image  string          // an image with /dnsq (hack/tools/cmd/dnsq)
	// NodeLocal is NodeLocal DNSCache's address: the nameserver a pod must have when kube-system
	// runs the node-local-dns DaemonSet.
	NodeLocal string
	// Converge bounds how long a check is asked again before it fails: the DNS learns of the
	// fixtures a moment after the API server.
	Converge time.Duration
	// PodTimeout bounds the wait for the fixtures' pods to run.
	PodTimeout time.Duration
	// Node, when set, is the node the client pods run on: DNS as that node's pods get it (its
	// kube-proxy, its NodeLocal DNSCache, its path to the DNS pods).
	Node string

	// DirectTo, behind NodeLocal DNSCache, is the cluster DNS's address, which a second client
	// pod (direct) asks past the cache.
	DirectTo string

	// DNSConfig, when the DNS is not the kubelet's (DNS is not kube-system/kube-dns), is the client
	// pod's DNS config: what the kubelet would write with DNS as its cluster DNS.
	DNSConfig *api.PodDNSConfig
}

// Report is what the doctor found.
type Report struct {
	DNS       string  `json:"dns"`       // NAMESPACE/NAME of the DNS Service
	Namespace string  `json:"namespace"` // the fixtures' namespace, deleted at the end
	Checks    []Check `json:"checks"`
	Pass      bool    `json:"pass"` // every check that is not a measurement passed
}

// nodeLocalDaemonSet is NodeLocal DNSCache's DaemonSet in kube-system, as its manifest names it.
const nodeLocalDaemonSet = "node-local-dns"

// Run checks the cluster's DNS. An error means the doctor could not check (RBAC, fixtures that
// did not start); a DNS that answers wrong is a report with failed checks.
func Run(ctx context.Context, cfg *rest.Config, c kubernetes.Interface, o Options) (*Report, error) {
	if err := replica.Need(ctx, c,
		replica.Permission{Verb: "create", Resource: "namespaces"},
		replica.Permission{Verb: "delete", Resource: "namespaces"},
	); err != nil {
		return nil, err
	}
	front, err := findDNS(ctx, c, o.DNS)
	if err != nil {
		return nil, err
	}
	nameserver := front.ClusterIPs[0]
	if o.DNS != replica.DefaultService {
		o.DNSConfig = &api.PodDNSConfig{Nameservers: []string{nameserver}, Options: []api.PodDNSConfigOption{{Name: "ndots", Value: new(fmt.Sprint(kubeletNdots))}}}
	} else if _, err := c.AppsV1().DaemonSets("kube-system").Get(ctx, nodeLocalDaemonSet, meta.GetOptions{}); err == nil {
		nameserver = o.NodeLocal
		// A second client asks the cluster DNS itself, past the cache: where the two differ, the
		// cache is at fault.
		o.DirectTo = front.ClusterIPs[0]
	}
	r := &Report{DNS: o.DNS.String()}
	f, err := makeFixtures(ctx, c, o)
	if f != nil {
		r.Namespace = f.Namespace
		defer func() {
			// The namespace takes its objects with it; its deletion outlives the doctor.
			c.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), f.Namespace, meta.DeleteOptions{})
		}()
	}
	if err != nil {
		return r, err
	}
	pod := podResolver{cfg: cfg, c: c, namespace: f.Namespace, pod: f.Client}
	r.Checks = append(r.Checks, frontCheck(front))
	conf, err := pod.ResolvConf(ctx)
	if err != nil {
		return r, fmt.Errorf("reading the client pod's resolv.conf: %w", err)
	}
	r.Checks = append(r.Checks, confChecks(conf, f.Namespace, o.Domain, nameserver)...)
	converge := time.Now().Add(o.Converge)
	if front.Ready == 0 {
		converge = time.Now() // nothing to wait for: each check is asked once
	}
	ls := lookups(f, o.Domain, front)
	for _, l := range ls {
		r.Checks = append(r.Checks, ask(ctx, pod, l, converge))
	}
	if f.Direct != "" {
		direct := podResolver{cfg: cfg, c: c, namespace: f.Namespace, pod: f.Direct}
		r.Checks = append(r.Checks, cacheCheck(ctx, r.Checks[len(r.Checks)-len(ls):], ls, direct, nameserver, o.DirectTo))
	}
	r.Pass = passed(r.Checks)
	return r, nil
}

func passed(checks []Check) bool {
	for _, c := range checks {
		if !c.Pass && !c.Info {
			return false
		}
	}
	return true
}

// findDNS reads the DNS Service and counts its ready endpoints.
func findDNS(ctx context.Context, c kubernetes.Interface, s replica.Service) (dnsService, error) {
	d := dnsService{Namespace: s.Namespace, Name: s.Name}
	svc, err := c.CoreV1().Services(s.Namespace).Get(ctx, s.Name, meta.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return d, fmt.Errorf("the cluster has no Service %s in front of its DNS (name another with --dns-service NAMESPACE/NAME)", s)
	case err != nil:
		return d, fmt.Errorf("reading the DNS Service %s: %w", s, err)
	case len(svc.Spec.ClusterIPs) == 0 || svc.Spec.ClusterIP == api.ClusterIPNone:
		return d, errors.New("the DNS Service " + s.String() + " has no ClusterIP: pods cannot have it as their nameserver")
	}
	d.ClusterIPs = svc.Spec.ClusterIPs
	slices, err := c.DiscoveryV1().EndpointSlices(s.Namespace).List(ctx, meta.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + s.Name})
	if err != nil {
		return d, fmt.Errorf("reading the DNS Service's EndpointSlices: %w", err)
	}
	seen := map[string]bool{}
	for _, sl := range slices.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				seen[a] = true
			}
		}
	}
	d.Ready = len(seen)
	return d, nil
}
