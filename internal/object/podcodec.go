package object

import (
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
type podCodec = slimCodec[podFields, StoredPod, *StoredPod]

// NewPodCodec returns the codec of pods and pod lists: each pod is made by store, as SlimPod makes
// a pod decoded in full; anything else goes to fallback.
func NewPodCodec(store *PodStore, fallback runtime.Decoder) runtime.Serializer {
	read := func(raw []byte, f *podFields) error { return decodePod(raw, f, store.keepNode) }
	return &podCodec{kind: "Pod", read: read, store: store.store, fallback: fallback}
}

// decodePod reads what DNS needs of a protobuf Pod into f (its node only with keepNode), and
// skips the rest.
func decodePod(raw []byte, f *podFields, keepNode bool) error {
	return eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case podMetadata:
			return decodeObjectMeta(v, &f.objectFields, func(key, value []byte) {
				f.labels = append(f.labels, [2]string{string(key), string(value)})
			}, nil)
		case podSpec:
			return eachField(v, func(num protowire.Number, v []byte, x uint64) error {
				switch {
				case num == specHostNetwork:
					f.hostNetwork = x != 0
				case num == specNodeName && keepNode:
					f.nodeName = string(v)
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
