package wire

import (
	"io"

	"github.com/kubetree/kubetree/internal/object"
	"google.golang.org/protobuf/encoding/protowire"
)

// The audit's lists: the API server's metadata-only list of a resource (PartialObjectMetadataList,
// in protobuf), read as it streams in. Of each object only its namespace, name and
// resourceVersion are kept, one object at a time, so a list of any length takes a few kilobytes:
// at 1,000,000 endpoints the list of EndpointSlices is ~8 MB, and decoded in full ~25 MB.

// partialListKind is the kind of the envelope around a metadata-only list.
const partialListKind = "PartialObjectMetadataList"

// ReadVersions reads a metadata-only list (PartialObjectMetadataList, in protobuf) from r and calls
// f with each object's namespace, name and resourceVersion, in the list's order.
func ReadVersions(r io.Reader, f func(namespace, name, version string)) error {
	return readList(r, partialListKind, nil, func(item []byte) error {
		var o object.ObjectFields
		err := eachField(item, func(num protowire.Number, v []byte, _ uint64) error {
			if num == partialObjectMeta {
				_, err := decodeObjectMeta(v, &o, nil, nil)
				return err
			}
			return nil
		})
		if err == nil {
			f(o.Namespace, o.Name, o.ResourceVersion)
		}
		return err
	})
}
