package wire

import (
	"github.com/kubetree/kubetree/internal/object"
	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
)

// A pod is the largest object kubetree watches and the most numerous: containers, volumes,
// conditions, managed fields. With pods verified, decoding every pod in full would cost most of
// kubetree's CPU for a few fields. The pod codec reads those fields straight from the API server's
// protobuf and skips the rest without decoding it; what it makes is the slim pod the informer
// keeps. Anything that is not a pod (the Status of a watch error) goes to the usual decoder.

// Field numbers, from k8s.io/api's core/v1 generated.proto.
const (
	podMetadata = 1 // core/v1 Pod
	podSpec     = 2
	podStatus   = 3

	specNodeName    = 10 // core/v1 PodSpec
	specHostNetwork = 11

	statusPhase  = 1 // core/v1 PodStatus
	statusPodIP  = 6
	statusPodIPs = 12
	podIPIP      = 1 // core/v1 PodIP
)

// podCodec decodes pods and pod lists slim into the store's pods.
type podCodec = slimCodec[object.PodFields, object.StoredPod, *object.StoredPod]

// NewPodCodec returns the codec of pods and pod lists: each pod is made by store, as its SlimPod makes
// a pod decoded in full; anything else goes to fallback.
func NewPodCodec(store *object.PodStore, fallback runtime.Decoder) runtime.Serializer {
	keepNode := store.KeepsNode()
	read := func(raw []byte, f *object.PodFields) error { return decodePod(raw, f, keepNode) }
	return &podCodec{kind: "Pod", read: read, store: store.Store, fallback: fallback}
}

// decodePod reads what DNS needs of a protobuf Pod into f (its node only with keepNode), and
// skips the rest.
func decodePod(raw []byte, f *object.PodFields, keepNode bool) error {
	return eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case podMetadata:
			_, err := decodeObjectMeta(v, &f.ObjectFields, func(key, value []byte) {
				f.Labels = append(f.Labels, [2]string{string(key), string(value)})
			}, nil)
			return err
		case podSpec:
			return eachField(v, func(num protowire.Number, v []byte, x uint64) error {
				switch {
				case num == specHostNetwork:
					f.HostNetwork = x != 0
				case num == specNodeName && keepNode:
					f.NodeName = string(v)
				}
				return nil
			})
		case podStatus:
			var podIP string
			err := eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				switch num {
				case statusPhase:
					f.Phase = string(v)
				case statusPodIP:
					podIP = string(v)
				case statusPodIPs:
					return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
						if num == podIPIP {
							f.IPs = append(f.IPs, string(v))
						}
						return nil
					})
				}
				return nil
			})
			if len(f.IPs) == 0 && podIP != "" {
				f.IPs = []string{podIP}
			}
			return err
		}
		return nil
	})
}
