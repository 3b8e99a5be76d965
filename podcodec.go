package kubetree

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// A pod is the largest object kubetree watches and the most numerous: containers, volumes,
// conditions, managed fields. With pods verified, decoding every pod in full would cost most of
// kubetree's CPU for a few fields. podCodec reads those fields straight from the API server's
// protobuf and skips the rest without decoding it; what it makes is the slim pod the informer
// keeps. Anything that is not a pod (the Status of a watch error) goes to the usual decoder.

// Field numbers, from k8s.io/api and k8s.io/apimachinery's generated.proto.
const (
	unknownTypeMeta = 1 // runtime.Unknown
	unknownRaw      = 2
	typeMetaKind    = 2 // runtime.TypeMeta

	podMetadata = 1 // core/v1 Pod
	podSpec     = 2
	podStatus   = 3

	metaName            = 1 // meta/v1 ObjectMeta
	metaNamespace       = 3
	metaResourceVersion = 6
	metaLabels          = 11
	metaAnnotations     = 12

	mapKey   = 1
	mapValue = 2

	specHostNetwork = 11 // core/v1 PodSpec

	statusPhase  = 1 // core/v1 PodStatus
	statusPodIP  = 6
	statusPodIPs = 12
	podIPIP      = 1 // core/v1 PodIP

	listMetadata = 1 // core/v1 PodList
	listItems    = 2

	listMetaResourceVersion = 2 // meta/v1 ListMeta
	listMetaContinue        = 3
)

// protobufMagic starts every object the API server encodes as protobuf.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

var errBadProtobuf = errors.New("malformed protobuf")

// podCodec decodes pods and pod lists slim into the index's stored pods.
type podCodec = slimCodec[podFields, storedPod, *storedPod]

// storedPodList is a pod list decoded slim.
type storedPodList = slimList[storedPod]

func newPodCodec(index *podIndex, fallback runtime.Decoder) *podCodec {
	return &podCodec{kind: "Pod", read: decodePod, store: index.store, fallback: fallback}
}

// unknownEnvelope reads the kind and the raw object out of the protobuf envelope.
func unknownEnvelope(data []byte) (kind string, raw []byte, err error) {
	if !bytes.HasPrefix(data, protobufMagic) {
		return "", nil, errBadProtobuf
	}
	err = eachField(data[len(protobufMagic):], func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case unknownTypeMeta:
			return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				if num == typeMetaKind {
					kind = string(v)
				}
				return nil
			})
		case unknownRaw:
			raw = v
		}
		return nil
	})
	return kind, raw, err
}

func decodeListMeta(b []byte, m *meta.ListMeta) error {
	return eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case listMetaResourceVersion:
			m.ResourceVersion = string(v)
		case listMetaContinue:
			m.Continue = string(v)
		}
		return nil
	})
}

// decodePod reads what DNS needs of a protobuf Pod into f, and skips the rest.
func decodePod(raw []byte, f *podFields) error {
	return eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case podMetadata:
			return decodeObjectMeta(v, &f.objectFields, func(key, value []byte) {
				f.labels = append(f.labels, [2]string{string(key), string(value)})
			}, nil)
		case podSpec:
			return eachField(v, func(num protowire.Number, _ []byte, x uint64) error {
				if num == specHostNetwork {
					f.hostNetwork = x != 0
				}
				return nil
			})
		case podStatus:
			var podIP string
			err := eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case statusPhase:
					f.phase = string(v)
				case statusPodIP:
					podIP = string(v)
				case statusPodIPs:
					return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
						if num == podIPIP {
							f.ips = append(f.ips, string(v))
						}
						return nil
					})
				}
				return nil
			})
			if len(f.ips) == 0 && podIP != "" {
				f.ips = []string{podIP}
			}
			return err
		}
		return nil
	})
}

// mapEntry reads one entry of a protobuf map<string, string>.
func mapEntry(b []byte) (key, value []byte, err error) {
	err = eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case mapKey:
			key = v
		case mapValue:
			value = v
		}
		return nil
	})
	return key, value, err
}

// eachField calls f with every field of a protobuf message: its number, and its bytes
// (length-delimited) or its value (varint and fixed). Groups are skipped.
func eachField(b []byte, f func(num protowire.Number, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errBadProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %v", errBadProtobuf, protowire.ParseError(n))
		}
		b = b[n:]
		if err := f(num, v, x); err != nil {
			return err
		}
	}
	return nil
}

// slimSerializers is the client side of a REST client that decodes one kind slim: protobuf, with
// its codec for the objects and the usual protobuf serializer for the watch events around them.
type slimSerializers struct {
	proto runtime.SerializerInfo
}

func newSlimSerializers(codec func(fallback runtime.Decoder) runtime.Serializer) (*slimSerializers, error) {
	usual := scheme.Codecs.WithoutConversion()
	for _, info := range usual.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf && info.StreamSerializer != nil {
			s := &slimSerializers{proto: info}
			s.proto.Serializer = codec(usual.DecoderToVersion(info.Serializer, nil))
			return s, nil
		}
	}
	return nil, errors.New("no protobuf serializer in client-go's scheme")
}

// SupportedMediaTypes implements runtime.NegotiatedSerializer: protobuf only.
func (s *slimSerializers) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{s.proto}
}

// EncoderForVersion implements runtime.NegotiatedSerializer.
func (s *slimSerializers) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

// DecoderToVersion implements runtime.NegotiatedSerializer: the codec makes what the informer
// keeps, with no conversion.
func (s *slimSerializers) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// slimREST is a client of one API group version whose objects codec decodes slim.
func slimREST(rc *rest.Config, apiPath string, gv schema.GroupVersion, codec func(fallback runtime.Decoder) runtime.Serializer) (rest.Interface, error) {
	ser, err := newSlimSerializers(codec)
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(rc)
	c.APIPath = apiPath
	c.GroupVersion = &gv
	c.NegotiatedSerializer = ser
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf
	return rest.RESTClientFor(c)
}

// podREST is a client of the core API group that decodes pods with podCodec.
func podREST(rc *rest.Config, index *podIndex) (rest.Interface, error) {
	return slimREST(rc, "/api", api.SchemeGroupVersion, func(fallback runtime.Decoder) runtime.Serializer {
		return newPodCodec(index, fallback)
	})
}

// slimListWatch lists and watches a resource through a slimREST client: the informer gets its
// objects slim already.
func slimListWatch(c rest.Interface, resource string) (list func(context.Context, meta.ListOptions) (runtime.Object, error), watch func(context.Context, meta.ListOptions) (watchIface, error)) {
	list = func(ctx context.Context, o meta.ListOptions) (runtime.Object, error) {
		return c.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Do(ctx).Get()
	}
	watch = func(ctx context.Context, o meta.ListOptions) (watchIface, error) {
		o.Watch = true
		return c.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Watch(ctx)
	}
	return list, watch
}
