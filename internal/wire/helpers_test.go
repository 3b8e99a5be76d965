package wire

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kubetree/kubetree/internal/k8stest"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The codecs' tests take the same objects through a codec and through the transform of an object
// decoded in full, and check that both come out the same.

// hundredEndpoints is a slice of 100 ready endpoints with their pods and zones, every other one
// with a hostname, as a headless service's slice is.
func hundredEndpoints() *discovery.EndpointSlice {
	eps := make([]k8stest.Endpoint, 100)
	for i := range eps {
		eps[i] = k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.128.%d.%d", i/250, i%250+1)}, Pod: fmt.Sprintf("db-%d", i),
			Zone: fmt.Sprintf("zone-%c", 'a'+i%3)}
		if i%2 == 0 {
			eps[i].Hostname = fmt.Sprintf("host%d", i)
		}
	}
	return k8stest.Slice("prod", "db", "db-1", discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 8080)), eps...)
}

// codecAsTransform decodes each object, then a list of them all, with a slim codec and checks
// that each comes out as transform makes the same object decoded in full: the two ways in end in
// one model. list holds objs in order.
func codecAsTransform[T runtime.Object, S any](t *testing.T, codec runtime.Decoder, encode func(testing.TB, runtime.Object) []byte,
	kind string, objs []T, list runtime.Object, transform func(T) any) {
	t.Helper()
	for _, o := range objs {
		name := o.GetObjectKind().GroupVersionKind().Kind
		if m, err := apimeta.Accessor(o); err == nil {
			name = m.GetName()
		}
		got, gvk, err := codec.Decode(encode(t, o), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := transform(o); gvk.Kind != kind || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded\n %+v\nwant\n %+v", name, got, want)
		}
	}
	encoded := encode(t, list)
	got, _, err := codec.Decode(encoded, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The informers read a list as it streams in: a byte at a time, the same list.
	streamed, err := codec.(interface {
		ReadList(io.Reader) (runtime.Object, error)
	}).ReadList(iotest.OneByteReader(bytes.NewReader(encoded)))
	if err != nil {
		t.Fatalf("list read as it streams in: %v", err)
	}
	if !reflect.DeepEqual(streamed, got) {
		t.Errorf("list read as it streams in:\n %+v\nwant, as decoded whole:\n %+v", streamed, got)
	}
	if _, err := codec.(interface {
		ReadList(io.Reader) (runtime.Object, error)
	}).ReadList(bytes.NewReader(encoded[:len(encoded)-1])); err == nil {
		t.Error("a list cut short was read without an error")
	}
	want, err := apimeta.ListAccessor(list)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := got.(*slimList[S])
	if !ok || l.ResourceVersion != want.GetResourceVersion() || l.Continue != want.GetContinue() || len(l.Items) != len(objs) {
		t.Fatalf("list: %+v", got)
	}
	for i := range l.Items {
		if want := transform(objs[i]); !reflect.DeepEqual(&l.Items[i], want) {
			t.Errorf("list item %d: %+v, want %+v", i, &l.Items[i], want)
		}
	}
}

// decodedItems is what a slim codec decoded: the stored object, or a list's items; none for the
// fallback's own types (a Status), and the test fails on any other.
func decodedItems[S any](t *testing.T, obj runtime.Object) []*S {
	switch o := any(obj).(type) {
	case *S:
		return []*S{o}
	case *slimList[S]:
		items := make([]*S, len(o.Items))
		for i := range o.Items {
			items[i] = &o.Items[i]
		}
		return items
	}
	if !strings.HasPrefix(reflect.TypeOf(obj).String(), "*v1.") {
		t.Fatalf("decoded to %T", obj)
	}
	return nil
}

// isDNSLabel reports whether s is a lower-case DNS label, as the model promises of every name it
// keeps.
func isDNSLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }
