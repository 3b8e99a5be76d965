package wire

import (
	"github.com/kubetree/kubetree/internal/object"
	"google.golang.org/protobuf/encoding/protowire"
	api "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Services arrive in full at every start and relist, one for each service of the cluster, with
// their managed fields, annotations and status: decoded in full, garbage a moment later, and the
// largest part of a start's decoding. The service codec reads only what object.StoreService reads
// of a Service straight from the API server's protobuf into a Service of those fields, and hands it
// to object.StoreService, the same place a Service decoded in full goes through.

// Field numbers, from k8s.io/api's core/v1 and k8s.io/apimachinery's meta/v1 generated.proto.
const (
	serviceMetadata = 1 // core/v1 Service
	serviceSpec     = 2
	serviceStatus   = 3

	specPorts               = 1 // core/v1 ServiceSpec
	specSelector            = 2
	specClusterIP           = 3
	specType                = 4
	specExternalIPs         = 5
	specExternalName        = 10
	specClusterIPs          = 18
	specTrafficDistribution = 23

	servicePortName     = 1 // core/v1 ServicePort
	servicePortProtocol = 2
	servicePortNumber   = 3

	statusLoadBalancer  = 1 // core/v1 ServiceStatus
	loadBalancerIngress = 1 // core/v1 LoadBalancerStatus
	ingressIP           = 1 // core/v1 LoadBalancerIngress
	ingressHostname     = 2
)

// serviceFields are what the service codec reads of a Service.
type serviceFields struct {
	object.ObjectFields
	svc api.Service
}

type serviceCodec = slimCodec[serviceFields, object.StoredService, *object.StoredService]

// NewServiceCodec returns the codec of Services and their lists: each service is made by
// object.StoreService (with topology, as SlimServiceWithTopology), as the transform makes a Service
// decoded in full; anything else goes to fallback.
func NewServiceCodec(topology bool, fallback runtime.Decoder) runtime.Serializer {
	return &serviceCodec{group: api.GroupName, kind: "Service", read: decodeServiceProto, fallback: fallback,
		store: func(f *serviceFields) *object.StoredService {
			f.svc.Name, f.svc.Namespace, f.svc.ResourceVersion = f.Name, f.Namespace, f.ResourceVersion
			return object.StoreService(&f.svc, topology)
		}}
}

// decodeServiceProto reads what object.StoreService needs of a protobuf Service into f, and skips the
// rest.
func decodeServiceProto(raw []byte, f *serviceFields) error {
	spec, status := &f.svc.Spec, &f.svc.Status
	return eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case serviceMetadata:
			return decodeServiceProtoMeta(v, f)
		case serviceSpec:
			return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case specPorts:
					var p api.ServicePort
					err := eachField(v, func(num protowire.Number, v []byte, x uint64) error {
						switch num {
						case servicePortName:
							p.Name = string(v)
						case servicePortProtocol:
							p.Protocol = api.Protocol(v)
						case servicePortNumber:
							p.Port = int32(x)
						}
						return nil
					})
					spec.Ports = append(spec.Ports, p)
					return err
				case specSelector:
					// Only whether there is one counts (headless_with_selector).
					if spec.Selector == nil {
						spec.Selector = map[string]string{"": ""}
					}
				case specClusterIP:
					spec.ClusterIP = string(v)
				case specClusterIPs:
					spec.ClusterIPs = append(spec.ClusterIPs, string(v))
				case specType:
					spec.Type = api.ServiceType(v)
				case specExternalIPs:
					spec.ExternalIPs = append(spec.ExternalIPs, string(v))
				case specExternalName:
					spec.ExternalName = string(v)
				case specTrafficDistribution:
					d := string(v)
					spec.TrafficDistribution = &d
				}
				return nil
			})
		case serviceStatus:
			return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				if num != statusLoadBalancer {
					return nil
				}
				return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
					if num != loadBalancerIngress {
						return nil
					}
					var in api.LoadBalancerIngress
					err := eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
						switch num {
						case ingressIP:
							in.IP = string(v)
						case ingressHostname:
							in.Hostname = string(v)
						}
						return nil
					})
					status.LoadBalancer.Ingress = append(status.LoadBalancer.Ingress, in)
					return err
				})
			})
		}
		return nil
	})
}

// decodeServiceProtoMeta reads a Service's identity, its creation time and the annotations its
// topology reads.
func decodeServiceProtoMeta(b []byte, f *serviceFields) error {
	created, err := decodeObjectMeta(b, &f.ObjectFields, nil, func(key, value []byte) {
		switch k := string(key); k {
		case api.DeprecatedAnnotationTopologyAwareHints, api.AnnotationTopologyMode:
			if f.svc.Annotations == nil {
				f.svc.Annotations = map[string]string{}
			}
			f.svc.Annotations[k] = string(value)
		}
	})
	if err != nil {
		return err
	}
	f.svc.CreationTimestamp, err = protoTime(created)
	return err
}
