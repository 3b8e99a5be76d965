package informer

import (
	"context"
	"errors"
	"io"

	"github.com/kubetree/kubetree/internal/apiclient"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The slim REST clients: a resource read through a client whose codec decodes its objects slim
// (internal/wire's), so that the informer gets its objects slim already and the rest of each
// object is never decoded; its watches are read by a goroutine of ours (watchstream.go).

// slimSerializers is the client side of a REST client that decodes one kind slim: protobuf, with
// its codec for the objects and the usual protobuf serializer for the watch events around them;
// lists is the same codec, reading a list as it streams in.
type slimSerializers struct {
	proto runtime.SerializerInfo
	lists listReader
}

func newSlimSerializers(codec func(fallback runtime.Decoder) runtime.Serializer) (*slimSerializers, error) {
	usual := scheme.Codecs.WithoutConversion()
	for _, info := range usual.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf && info.StreamSerializer != nil {
			s := &slimSerializers{proto: info}
			s.proto.Serializer = codec(usual.DecoderToVersion(info.Serializer, nil))
			lists, ok := s.proto.Serializer.(listReader)
			if !ok {
				return nil, errors.New("a slim codec that cannot read a list as it streams in")
			}
			s.lists = lists
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

// listReader is what the slim codecs (internal/wire) are besides a runtime.Serializer: a list is read
// as it streams in, never held whole.
type listReader interface {
	ReadList(r io.Reader) (runtime.Object, error)
}

// slimClient is a REST client of one API group version whose objects its serializers decode
// slim; its watches are read with them by a goroutine of ours (streamWatch), over http1 while they
// are busy.
type slimClient struct {
	rest.Interface
	http1 rest.Interface // the same over HTTP/1.1; nil: HTTP/2 only
	ser   *slimSerializers
}

// SlimREST is a client of one API group version (under apiPath, "/api" or "/apis") whose objects
// codec decodes slim; SlimListWatch lists and watches through it.
func SlimREST(rc *rest.Config, apiPath string, gv schema.GroupVersion, codec func(fallback runtime.Decoder) runtime.Serializer) (rest.Interface, error) {
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
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	sc := &slimClient{Interface: client, ser: ser}
	if c1 := apiclient.HTTP1Config(c); c1 != nil {
		c1.RateLimiter = client.GetRateLimiter() // one budget for both
		if sc.http1, err = rest.RESTClientFor(c1); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// SlimListWatch lists (in a namespace, "" for all) and watches a resource through a SlimREST
// client: the informer gets its objects slim already.
func SlimListWatch(c rest.Interface, resource string) (list func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error), watchFn func(context.Context, meta.ListOptions) (watch.Interface, error)) {
	list = func(ctx context.Context, ns string, o meta.ListOptions) (runtime.Object, error) {
		req := c.Get().Namespace(ns).Resource(resource).VersionedParams(&o, scheme.ParameterCodec)
		sc, ok := c.(*slimClient)
		if !ok {
			return req.Do(ctx).Get()
		}
		// Read as it streams in: a response is many times the slim objects it decodes to.
		body, err := req.Stream(ctx)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return sc.ser.lists.ReadList(body)
	}
	route := new(watchRoute) // HTTP/2, or HTTP/1.1 while busy (watchstream.go)
	watchFn = func(ctx context.Context, o meta.ListOptions) (watch.Interface, error) {
		if sc, ok := c.(*slimClient); ok {
			sw, err := streamWatchOf(ctx, sc, resource, o, route)
			if err != nil {
				return nil, err
			}
			return sw, nil
		}
		o.Watch = true
		return c.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Watch(ctx)
	}
	return list, watchFn
}
