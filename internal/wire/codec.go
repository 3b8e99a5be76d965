package wire

import (
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// slimCodec decodes one kind of object, and lists of it, straight from the API server's protobuf
// into what the informer keeps: read takes the fields DNS needs out of an object and skips the
// rest, and store makes the stored object of them, as the transform of a fully decoded object
// does. Anything else (the Status of a watch error) goes to fallback. The pod, Service and
// EndpointSlice codecs are the three of these.
type slimCodec[F, S any, PS interface {
	*S
	runtime.Object
}] struct {
	group, kind string // lists are kind + "List"
	read        func(raw []byte, f *F) error
	store       func(f *F) PS
	fallback    runtime.Decoder
}

// slimList is a list decoded slim.
type slimList[S any] struct {
	meta.ListMeta
	Items []S
}

// GetObjectKind implements runtime.Object.
func (l *slimList[S]) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; the items are never changed.
func (l *slimList[S]) DeepCopyObject() runtime.Object { c := *l; return &c }

// GetListMeta implements meta.ListMetaAccessor.
func (l *slimList[S]) GetListMeta() meta.ListInterface { return &l.ListMeta }

// Decode implements runtime.Decoder.
func (c *slimCodec[F, S, PS]) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	kind, raw, err := unknownEnvelope(data)
	if err != nil || (kind != c.kind && kind != c.kind+"List") {
		return c.fallback.Decode(data, gvk, into)
	}
	out := &schema.GroupVersionKind{Group: c.group, Version: "v1", Kind: kind}
	if kind != c.kind {
		l, err := c.decodeList(raw)
		return l, out, err
	}
	var f F
	if err := c.read(raw, &f); err != nil {
		return nil, nil, err
	}
	return c.store(&f), out, nil
}

// ReadList reads a list of the codec's kind from r as it streams in, each item decoded slim as it
// arrives: what is held is the list's slim objects and one item's bytes, never the whole response.
func (c *slimCodec[F, S, PS]) ReadList(r io.Reader) (runtime.Object, error) {
	l := &slimList[S]{}
	err := readList(r, c.kind+"List",
		func(b []byte) error { return decodeListMeta(b, &l.ListMeta) },
		func(b []byte) error { return c.appendItem(l, b) })
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (c *slimCodec[F, S, PS]) decodeList(raw []byte) (*slimList[S], error) {
	l := &slimList[S]{}
	err := eachField(raw, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case listMetadata:
			return decodeListMeta(v, &l.ListMeta)
		case listItems:
			return c.appendItem(l, v)
		}
		return nil
	})
	return l, err
}

// appendItem decodes one item of a list slim and appends it to l.
func (c *slimCodec[F, S, PS]) appendItem(l *slimList[S], raw []byte) error {
	var f F
	if err := c.read(raw, &f); err != nil {
		return err
	}
	l.Items = append(l.Items, *c.store(&f))
	return nil
}

// Encode implements runtime.Encoder: kubetree only reads.
func (c *slimCodec[F, S, PS]) Encode(runtime.Object, io.Writer) error {
	return fmt.Errorf("kubetree: the %s codec only decodes", c.kind)
}

// Identifier implements runtime.Encoder.
func (c *slimCodec[F, S, PS]) Identifier() runtime.Identifier {
	return runtime.Identifier("kubetree-" + c.kind)
}
