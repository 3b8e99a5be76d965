package wire

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/kubetree/kubetree/internal/object"
	"google.golang.org/protobuf/encoding/protowire"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the slim codecs, the watch event reader and the audit's lists all read of the API server's
// protobuf: the envelope, list and object metadata, map entries, and the walk over a message's
// fields.

// Field numbers, from k8s.io/apimachinery's generated.proto.
const (
	unknownTypeMeta = 1 // runtime.Unknown
	unknownRaw      = 2
	typeMetaKind    = 2 // runtime.TypeMeta

	metaName              = 1 // meta/v1 ObjectMeta
	metaNamespace         = 3
	metaResourceVersion   = 6
	metaCreationTimestamp = 8
	metaLabels            = 11
	metaAnnotations       = 12

	mapKey   = 1
	mapValue = 2

	listMetadata = 1 // every List: its ListMeta and its items
	listItems    = 2

	listMetaResourceVersion = 2 // meta/v1 ListMeta
	listMetaContinue        = 3

	partialObjectMeta = 1 // meta/v1 PartialObjectMetadata

	timeSeconds = 1 // meta/v1 Time
)

// protobufMagic starts every object the API server encodes as protobuf.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

var errBadProtobuf = errors.New("malformed protobuf")

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

// decodeObjectMeta reads a protobuf ObjectMeta's identity and list-end bookmark annotation into o,
// hands each label and each other annotation to label and annotation (nil: skipped), and returns
// its creation time as sent (meta/v1 Time; nil without one), which only Services read.
func decodeObjectMeta(b []byte, o *object.ObjectFields, label, annotation func(key, value []byte)) (created []byte, err error) {
	err = eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case metaName:
			o.Name = string(v)
		case metaNamespace:
			o.Namespace = string(v)
		case metaResourceVersion:
			o.ResourceVersion = string(v)
		case metaCreationTimestamp:
			created = v
		case metaLabels, metaAnnotations:
			key, value, err := mapEntry(v)
			switch {
			case err != nil:
				return err
			case num == metaLabels && label != nil:
				label(key, value)
			case num == metaAnnotations && annotation != nil:
				annotation(key, value)
			}
		}
		return nil
	})
	return created, err
}

// protoTime reads a meta/v1 Time as meta/v1 decodes it: seconds only, and zero when empty.
func protoTime(b []byte) (meta.Time, error) {
	if len(b) == 0 {
		return meta.Time{}, nil
	}
	var seconds int64
	err := eachField(b, func(num protowire.Number, _ []byte, x uint64) error {
		if num == timeSeconds {
			seconds = int64(x)
		}
		return nil
	})
	return meta.Unix(seconds, 0), err
}
