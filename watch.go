package kubetree

import (
	"fmt"

	"github.com/kubetree/kubetree/internal/apiclient"
	"github.com/kubetree/kubetree/internal/watcher"
)

// The watcher (internal/watcher) keeps the cluster current from the API server and hands every
// change to the applier; here it is given what the Corefile says and the clients it watches
// through.

// newWatcher connects to the API server the Corefile names and watches it for k, writing through a.
func (k *Kubetree) newWatcher(a watcher.Applier) (*watcher.Watcher, error) {
	rc, err := apiclient.Config(k.cfg.apiOptions())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.cfg.apiSource(), err)
	}
	o := k.watchOptions()
	clients, err := watcher.Connect(rc, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.cfg.apiSource(), err)
	}
	return watcher.New(o, a, clients)
}

// newReviewer connects to the same API server for explain's reviews, through a configuration and
// a connection of their own: apiserver_qps, apiserver_burst and apiserver_max_inflight bound the
// watch, and the Reviewer bounds the reviews itself.
func (k *Kubetree) newReviewer() (*apiclient.Reviewer, error) {
	o := k.cfg.apiOptions()
	o.QPS, o.Burst, o.MaxInflight = 0, 0, 0
	rc, err := apiclient.Config(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.cfg.apiSource(), err)
	}
	return apiclient.NewReviewer(rc)
}

// apiSource names the options that say where the API server is, with their values, for the
// errors of connecting to it.
func (c *config) apiSource() string {
	switch {
	case c.kubeconfig != "" && c.kubeContext != "":
		return "kubeconfig " + c.kubeconfig + " " + c.kubeContext
	case c.kubeconfig != "":
		return "kubeconfig " + c.kubeconfig
	case c.endpoint != "" && c.tlsCert != "":
		return "endpoint " + c.endpoint + " with tls " + c.tlsCert + " " + c.tlsKey + " " + c.tlsCA
	case c.endpoint != "":
		return "endpoint " + c.endpoint
	}
	return "in-cluster credentials (no endpoint or kubeconfig)"
}

// apiOptions are what the Corefile says of the API server and how to reach it.
func (c *config) apiOptions() apiclient.Options {
	return apiclient.Options{Endpoint: c.endpoint, TLSCert: c.tlsCert, TLSKey: c.tlsKey, TLSCA: c.tlsCA,
		Kubeconfig: c.kubeconfig, KubeContext: c.kubeContext, QPS: c.apiQPS, Burst: c.apiBurst, MaxInflight: c.apiMaxInflight}
}

// watchOptions are what the Corefile says of what to watch.
func (k *Kubetree) watchOptions() watcher.Options {
	c := &k.cfg
	o := watcher.Options{Namespaces: c.namespaces, NamespaceSelector: c.namespaceSelector, LabelSelector: c.labelSelector,
		NoEndpoints: c.noEndpoints, Slices: c.sliceOptions(false), MulticlusterSlices: c.sliceOptions(true),
		Multicluster: len(c.multiclusterZones) > 0, Topology: c.topology, PodStore: k.podStore,
		StartupTimeout: c.startupTimeout, AuditInterval: c.auditInterval, Synced: &k.synced, Metrics: k.metrics}
	if c.isolate != nil {
		o.IsolateLabels = c.isolate.Labels
	}
	return o
}
