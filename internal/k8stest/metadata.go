package k8stest

import (
	"bytes"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// MetadataList is objs as the API server sends a metadata-only list of them
// (Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1):
// each object's whole ObjectMeta, in key order (namespace/name, as etcd keeps them), protobuf.
func MetadataList(resourceVersion string, objs ...runtime.Object) ([]byte, error) {
	list := &meta.PartialObjectMetadataList{ListMeta: meta.ListMeta{ResourceVersion: resourceVersion}}
	list.SetGroupVersionKind(meta.SchemeGroupVersion.WithKind("PartialObjectMetadataList"))
	for _, o := range objs {
		m, err := apimeta.Accessor(o)
		if err != nil {
			return nil, err
		}
		p := apimeta.AsPartialObjectMetadata(m)
		p.SetGroupVersionKind(meta.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
		list.Items = append(list.Items, *p)
	}
	key := func(p meta.PartialObjectMetadata) string { return p.Namespace + "/" + p.Name }
	slices.SortFunc(list.Items, func(a, b meta.PartialObjectMetadata) int { return strings.Compare(key(a), key(b)) })
	var b bytes.Buffer
	if err := protobuf.NewSerializer(nil, nil).Encode(list, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
