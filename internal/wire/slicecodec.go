package wire

import (
	"github.com/kubetree/kubetree/internal/object"
	"google.golang.org/protobuf/encoding/protowire"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

// EndpointSlices hold every endpoint of the cluster, and at a relist every one of them arrives
// again while the old ones are held. Decoded in full, a slice of 100 endpoints is a hundred
// structs of pointers and strings, garbage a moment later. The slice codec reads what DNS needs
// straight from the API server's protobuf into object.SliceFields, skips the rest, and hands it to
// object.StoreSlice, the same place a slice decoded in full goes through.

// Field numbers, from k8s.io/api's discovery/v1 and core/v1 generated.proto.
const (
	esMetadata    = 1 // discovery/v1 EndpointSlice
	esEndpoints   = 2
	esPorts       = 3
	esAddressType = 4

	epAddresses           = 1 // discovery/v1 Endpoint
	epConditions          = 2
	epHostname            = 3
	epTargetRef           = 4
	epNodeName            = 6
	epZone                = 7
	epHints               = 8
	conditionsReady       = 1 // discovery/v1 EndpointConditions
	conditionsServing     = 2
	conditionsTerminating = 3
	hintsForZones         = 1 // discovery/v1 EndpointHints
	hintsForNodes         = 2
	forName               = 1 // discovery/v1 ForZone and ForNode

	epPortName     = 1 // discovery/v1 EndpointPort
	epPortProtocol = 2
	epPortNumber   = 3

	objectRefKind = 1 // core/v1 ObjectReference
	objectRefName = 3
)

// sliceCodec decodes EndpointSlices and their lists slim.
type sliceCodec = slimCodec[object.SliceFields, object.StoredSlice, *object.StoredSlice]

// NewSliceCodec returns the codec of EndpointSlices and their lists: each slice is made by
// object.StoreSlice with o, as object.SliceTransform makes a slice decoded in full; anything else
// goes to fallback.
func NewSliceCodec(o object.SliceOptions, fallback runtime.Decoder) runtime.Serializer {
	read := func(raw []byte, f *object.SliceFields) error { return decodeSliceProto(raw, f, o.Topology) }
	return &sliceCodec{group: discovery.GroupName, kind: "EndpointSlice", read: read,
		store: func(f *object.SliceFields) *object.StoredSlice { return object.StoreSlice(f, o) }, fallback: fallback}
}

// decodeSliceProto reads what DNS needs of a protobuf EndpointSlice into f, and skips the rest
// (each endpoint's node and hints too, unless topology asks for them).
// The endpoints are counted first, so that they are allocated once.
func decodeSliceProto(raw []byte, f *object.SliceFields, topology bool) error {
	n := 0
	if err := eachField(raw, func(num protowire.Number, _ []byte, _ uint64) error {
		if num == esEndpoints {
			n++
		}
		return nil
	}); err != nil {
		return err
	}
	f.Endpoints = make([]object.EndpointFields, 0, n)
	return eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case esMetadata:
			return decodeSliceProtoMeta(v, f)
		case esAddressType:
			f.AddressType = string(v)
		case esPorts:
			p := object.PortFields{Protocol: string(api.ProtocolTCP)}
			err := decodeSliceProtoPort(v, &p)
			f.Ports = append(f.Ports, p)
			return err
		case esEndpoints:
			var e object.EndpointFields
			err := decodeSliceProtoEndpoint(v, &e, topology)
			f.Endpoints = append(f.Endpoints, e)
			return err
		}
		return nil
	})
}

// decodeSliceProtoPort reads a protobuf EndpointPort into p.
func decodeSliceProtoPort(b []byte, p *object.PortFields) error {
	return eachField(b, func(num protowire.Number, v []byte, x uint64) error {
		switch num {
		case epPortName:
			p.Name = string(v)
		case epPortProtocol:
			p.Protocol = string(v)
		case epPortNumber:
			p.Port, p.Numbered = int32(x), true
		}
		return nil
	})
}

// decodeSliceProtoEndpoint reads a protobuf Endpoint into e (its node and hints only with
// topology).
func decodeSliceProtoEndpoint(b []byte, e *object.EndpointFields, topology bool) error {
	return eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case epAddresses:
			e.Addresses = append(e.Addresses, string(v))
		case epConditions:
			return eachField(v, func(num protowire.Number, _ []byte, x uint64) error {
				switch num {
				case conditionsReady:
					e.NotReady = x == 0
				case conditionsServing:
					e.NotServing = x == 0
				case conditionsTerminating:
					e.Terminating = x != 0
				}
				return nil
			})
		case epHostname:
			e.Hostname = string(v)
		case epZone:
			e.Zone = string(v)
		case epNodeName:
			if topology {
				e.NodeName = string(v)
			}
		case epHints:
			if topology {
				return decodeEndpointHints(v, e)
			}
		case epTargetRef:
			return decodeEndpointTargetRef(v, e)
		}
		return nil
	})
}

// decodeEndpointHints reads a protobuf EndpointHints into e's forZones and forNodes.
func decodeEndpointHints(b []byte, e *object.EndpointFields) error {
	return eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		if num != hintsForZones && num != hintsForNodes {
			return nil
		}
		name := ""
		err := eachField(v, func(n protowire.Number, v []byte, _ uint64) error {
			if n == forName {
				name = string(v)
			}
			return nil
		})
		if num == hintsForZones {
			e.ForZones = append(e.ForZones, name)
		} else {
			e.ForNodes = append(e.ForNodes, name)
		}
		return err
	})
}

// decodeEndpointTargetRef reads the pod an endpoint's targetRef names; the name of anything else
// is not a pod name.
func decodeEndpointTargetRef(b []byte, e *object.EndpointFields) error {
	var kind, name []byte
	err := eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case objectRefKind:
			kind = v
		case objectRefName:
			name = v
		}
		return nil
	})
	if string(kind) == "Pod" {
		e.PodName = string(name)
	} else {
		e.PodName = ""
	}
	return err
}

// decodeSliceProtoMeta reads the labels and annotation DNS needs of a slice's ObjectMeta.
func decodeSliceProtoMeta(b []byte, f *object.SliceFields) error {
	_, err := decodeObjectMeta(b, &f.ObjectFields, func(key, value []byte) {
		switch string(key) {
		case discovery.LabelServiceName:
			f.Service = string(value)
		case mcs.LabelServiceName:
			f.MCSService = string(value)
		case mcs.LabelSourceCluster:
			f.SourceCluster = string(value)
		}
	}, func(key, value []byte) {
		if string(key) == api.EndpointsLastChangeTriggerTime {
			f.Triggered = string(value)
		}
	})
	return err
}
