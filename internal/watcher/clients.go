package watcher

import (
	"github.com/kubetree/kubetree/internal/apiclient"
	"github.com/kubetree/kubetree/internal/informer"
	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/wire"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/typed/apis/v1alpha1"
)

// The clients the watcher reads the API server through: Services, EndpointSlices and pods through
// slim clients (informer.SlimREST) whose codec decodes them slim (wire.NewServiceCodec,
// wire.NewSliceCodec, wire.NewPodCodec), so that the informer gets its objects slim already and the
// rest of each object is never decoded; everything else through client-go's clientsets.

// Clients are what the watcher lists and watches through.
type Clients struct {
	Kube kubernetes.Interface
	// Versions lists names and versions only, for the audit (versionsREST).
	Versions rest.Interface
	// Services, Slices and Pods decode slim (Connect); nil: in full through Kube.
	Services, Slices, Pods rest.Interface
	Imports                mcsclient.MulticlusterV1alpha1Interface // nil without multicluster
	// Close closes the connections once the watches are off them; nil: nothing to close.
	Close func()
}

// Connect makes the clients of the API server rc names, each decoding what o watches slim.
func Connect(rc *rest.Config, o Options) (Clients, error) {
	var c Clients
	var err error
	if c.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return c, err
	}
	if c.Versions, err = versionsREST(rc); err != nil {
		return c, err
	}
	if c.Services, err = serviceREST(rc, o.Topology); err != nil {
		return c, err
	}
	if o.PodStore != nil {
		if c.Pods, err = podREST(rc, o.PodStore); err != nil {
			return c, err
		}
	}
	if !o.NoEndpoints {
		if c.Slices, err = sliceREST(rc, o.Slices); err != nil {
			return c, err
		}
	}
	if o.Multicluster {
		if c.Imports, err = mcsclient.NewForConfig(rc); err != nil {
			return c, err
		}
	}
	c.Close = func() { apiclient.Close(rc) }
	return c, nil
}

// podREST is a client of the core API group that decodes pods slim through store.
func podREST(rc *rest.Config, store *object.PodStore) (rest.Interface, error) {
	return informer.SlimREST(rc, "/api", api.SchemeGroupVersion, func(fallback runtime.Decoder) runtime.Serializer {
		return wire.NewPodCodec(store, fallback)
	})
}

// serviceREST is a client of the core/v1 API group that decodes Services with
// wire.NewServiceCodec.
func serviceREST(rc *rest.Config, topology bool) (rest.Interface, error) {
	return informer.SlimREST(rc, "/api", api.SchemeGroupVersion, func(fallback runtime.Decoder) runtime.Serializer {
		return wire.NewServiceCodec(topology, fallback)
	})
}

// sliceREST is a client of the discovery.k8s.io/v1 API group that decodes EndpointSlices with
// wire.NewSliceCodec.
func sliceREST(rc *rest.Config, o object.SliceOptions) (rest.Interface, error) {
	return informer.SlimREST(rc, "/apis", discovery.SchemeGroupVersion, func(fallback runtime.Decoder) runtime.Serializer {
		return wire.NewSliceCodec(o, fallback)
	})
}

// partialListAccept asks for a list of the objects' metadata only (names, versions, labels, owners:
// no spec, no status), in protobuf.
const partialListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// versionsREST is a client of every API group for the audit's metadata-only lists, which it reads
// as they stream in (wire.ReadVersions); its serializer decodes only the API server's errors.
func versionsREST(rc *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(rc)
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return rest.UnversionedRESTClientFor(c)
}
