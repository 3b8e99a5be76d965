package kubetree

import (
	"context"
	"errors"
	"strings"

	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/records"
	"github.com/kubetree/kubetree/internal/tree"
)

// Metadata keys, the in-tree plugin's under kubetree/ instead of kubernetes/.
const (
	mdClientNamespace = pluginName + "/client-namespace"
	mdClientPodName   = pluginName + "/client-pod-name"
	mdClientLabel     = pluginName + "/client-label/" // + the label's name
	mdNamespace       = pluginName + "/namespace"
	mdService         = pluginName + "/service"
	mdEndpoint        = pluginName + "/endpoint"
	mdKind            = pluginName + "/kind"
	mdPortName        = pluginName + "/port-name"
	mdProtocol        = pluginName + "/protocol"
	mdParseError      = pluginName + "/parse-error"
	mdCluster         = pluginName + "/cluster" // in multicluster zones only
	mdZone            = pluginName + "/zone"    // with zonal only: the zone a zone-scoped name asks for
)

// Metadata implements metadata.Provider: who asks (with pods verified: the client pod's namespace,
// name and labels) and what the query names in a zone of ours, for rewrite, view, log and
// template to use.
func (k *Kubetree) Metadata(ctx context.Context, state request.Request) context.Context {
	if p := k.query.ClientPod(state); p != nil {
		metadata.SetValueFunc(ctx, mdClientNamespace, func() string { return p.Identity.Namespace })
		metadata.SetValueFunc(ctx, mdClientPodName, func() string { return p.Name })
		for _, l := range p.Identity.Labels {
			metadata.SetValueFunc(ctx, mdClientLabel+l[0], func() string { return l[1] })
		}
	}
	i := tree.MatchZone(k.Zones, state.Name())
	if i < 0 {
		return ctx
	}
	z := k.zones[i]
	q, err := parseQuery(state.Name(), z.Name, z.Multicluster, k.cfg.zonal)
	if err != nil {
		metadata.SetValueFunc(ctx, mdParseError, func() string { return err.Error() })
		return ctx
	}
	values := map[string]string{mdPortName: q.port, mdProtocol: q.protocol, mdEndpoint: q.endpoint,
		mdService: q.service, mdNamespace: q.namespace, mdKind: q.kind}
	if z.Multicluster {
		values[mdCluster] = q.cluster
	}
	if k.cfg.zonal {
		values[mdZone] = q.zone
	}
	for key, value := range values {
		metadata.SetValueFunc(ctx, key, func() string { return value })
	}
	return ctx
}

// queryParts are the parts of a name in a cluster zone, as the in-tree plugin names them:
// [_port._protocol.|endpoint.]service.namespace.(svc|pod).zone, lower case, underscores stripped;
// in a multicluster zone also endpoint.cluster.service..., and with zonal (outside multicluster
// zones) zone.pin|prefer._zone.service.namespace.svc.zone.
type queryParts struct {
	port, protocol, endpoint, cluster, zone, service, namespace, kind string
}

var errNotClusterName = errors.New("invalid query name")

// parseQuery reads qname, in zone, into its parts; a name that is not of the cluster's shapes is an
// error, as in the in-tree plugin (the apex, svc and pod themselves are not). In a multicluster
// zone, two labels below the service are an endpoint and its cluster unless one starts with "_".
func parseQuery(qname, zone string, multicluster, zonal bool) (q queryParts, err error) {
	base := strings.ToLower(strings.TrimSuffix(qname[:len(qname)-len(zone)], "."))
	if base == "" || base == "svc" || base == "pod" {
		return q, nil
	}
	labels := strings.Split(base, ".")
	last := len(labels) - 1
	q.kind = labels[last]
	if q.kind != "svc" && q.kind != "pod" {
		return q, errNotClusterName
	}
	parts := []*string{&q.namespace, &q.service}
	for _, p := range parts {
		if last--; last < 0 {
			return q, nil
		}
		*p = labels[last]
	}
	switch last {
	case 0:
		return q, nil
	case 1:
		q.endpoint = labels[0]
	case 2:
		if multicluster && !strings.HasPrefix(labels[0], "_") && !strings.HasPrefix(labels[1], "_") {
			q.endpoint, q.cluster = labels[0], labels[1]
			return q, nil
		}
		q.port, q.protocol = strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_")
	default:
		if !zonal || multicluster || q.kind != "svc" || labels[last-1] != records.ZoneLabel ||
			(labels[last-2] != records.ZonePin && labels[last-2] != records.ZonePrefer) {
			return q, errNotClusterName
		}
		q.zone = strings.Join(labels[:last-2], ".")
	}
	return q, nil
}
