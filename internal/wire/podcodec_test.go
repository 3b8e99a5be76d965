package wire

import (
	"bytes"
	"strings"
	"testing"
	"unicode"

	"github.com/kubetree/kubetree/internal/k8stest"
	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// asAPIServer encodes obj as the API server sends it with protobuf.
func asAPIServer(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(protobufInfo().Serializer, api.SchemeGroupVersion).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// codecPods are pods with every field the codec reads, and much that it skips.
func codecPods() []*api.Pod {
	big := k8stest.Pod("prod", "web-7f9c", "10.244.1.5", "fd00::5")
	big.Labels = map[string]string{"app": "web", "pod-template-hash": "7f9c", "tier": "front"}
	big.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-30T12:00:00Z"}
	big.UID, big.ResourceVersion, big.Generation = "0b3f", "4711", 3
	big.OwnerReferences = []meta.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7f9c", UID: "1a2b"}}
	big.ManagedFields = []meta.ManagedFieldsEntry{{Manager: "kubelet", Operation: meta.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: meta.NewFieldsV1(`{"f:status":{"f:podIPs":{}}}`)}}
	big.Spec = api.PodSpec{NodeName: "node-1", Containers: []api.Container{{Name: "web", Image: "registry/web:1",
		Args: []string{"--port", "8080"}, Env: []api.EnvVar{{Name: "MODE", Value: "prod"}},
		Resources: api.ResourceRequirements{Limits: api.ResourceList{api.ResourceMemory: resource.MustParse("128Mi")}}}}}
	big.Status.Conditions = []api.PodCondition{{Type: api.PodReady, Status: api.ConditionTrue}}
	big.Status.HostIP = "192.168.1.10"

	host := k8stest.Pod("kube-system", "agent", "192.168.1.10")
	host.Spec.HostNetwork = true

	legacy := k8stest.Pod("prod", "legacy") // only status.podIP, as older API servers wrote it
	legacy.Status.PodIP = "10.244.1.9"

	done := k8stest.Pod("prod", "job", "10.244.1.8")
	done.Status.Phase = api.PodSucceeded

	odd := k8stest.Pod("prod", "odd", "10.244.1.7", "not-an-address")
	odd.Labels = map[string]string{"ok": "yes", "bad": "bell\a"}

	return []*api.Pod{big, host, legacy, done, odd, k8stest.Pod("prod", "pending")}
}

// TestPodCodecAsSlimPod: a pod read from protobuf by podCodec is what SlimPod makes of the same pod
// decoded in full: the two ways in end in one model.
func TestPodCodecAsSlimPod(t *testing.T) {
	for _, keepNode := range []bool{false, true} {
		t.Run(map[bool]string{false: "without topology", true: "with topology"}[keepNode], func(t *testing.T) {
			podCodecAsSlimPod(t, keepNode)
		})
	}
}

func podCodecAsSlimPod(t *testing.T, keepNode bool) {
	x := object.NewPodStore(keepNode)
	list := &api.PodList{ListMeta: meta.ListMeta{ResourceVersion: "99", Continue: "next"}}
	for _, p := range codecPods() {
		list.Items = append(list.Items, *p)
	}
	codecAsTransform[*api.Pod, object.StoredPod](t, NewPodCodec(x, scheme.Codecs.UniversalDeserializer()), asAPIServer, "Pod", codecPods(), list,
		func(p *api.Pod) any { stored, _ := x.SlimPod(p.DeepCopy()); return stored })
}

// TestPodCodecBookmarksAndErrors: a bookmark keeps the version the reflector watches from, and a
// watch error's Status goes to the usual decoder, so that the reflector sees a 410 Gone as one.
func TestPodCodecBookmarksAndErrors(t *testing.T) {
	x := object.NewPodStore(false)
	codec := NewPodCodec(x, scheme.Codecs.UniversalDeserializer())
	bookmark := &api.Pod{ObjectMeta: meta.ObjectMeta{ResourceVersion: "12345"}}
	got, _, err := codec.Decode(asAPIServer(t, bookmark), nil, nil)
	if err != nil || got.(*object.StoredPod).ResourceVersion != "12345" {
		t.Fatalf("bookmark: %+v, %v", got, err)
	}
	gone := apierrors.NewResourceExpired("too old resource version")
	got, _, err = codec.Decode(asAPIServer(t, &gone.ErrStatus), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := got.(*meta.Status); !ok || !apierrors.IsResourceExpired(apierrors.FromObject(s)) {
		t.Fatalf("a watch error's Status: %#v", got)
	}
}

// FuzzPodCodec: whatever bytes arrive, the codec returns an error or a pod, never panics; and a
// pod truncated anywhere is an error or a pod, not a wrong kind.
func FuzzPodCodec(f *testing.F) {
	for _, p := range codecPods() {
		f.Add(asAPIServer(f, p))
	}
	f.Add([]byte("k8s\x00"))
	f.Add([]byte{})
	x := object.NewPodStore(false)
	codec := NewPodCodec(x, scheme.Codecs.UniversalDeserializer())
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := codec.Decode(data, nil, nil)
		if err != nil {
			return
		}
		for _, o := range decodedItems[object.StoredPod](t, obj) {
			if o.Identity == nil {
				t.Fatalf("a pod without an identity")
			}
			for _, a := range o.Addrs() {
				if !a.IsValid() || a.Is4In6() {
					t.Fatalf("a bad address kept: %v", a)
				}
			}
			for _, l := range o.Identity.Labels {
				if !printable(l[0] + l[1]) {
					t.Fatalf("an unprintable label kept: %q", l)
				}
			}
		}
	})
}

// BenchmarkPodDecode decodes one realistic pod from protobuf in full, as client-go does, and slim.
func BenchmarkPodDecode(b *testing.B) {
	data := asAPIServer(b, codecPods()[0])
	x := object.NewPodStore(false)
	codec := NewPodCodec(x, scheme.Codecs.UniversalDeserializer())
	full := scheme.Codecs.UniversalDeserializer()
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj, _, _ := full.Decode(data, nil, nil)
			x.SlimPod(obj)
		}
	})
	b.Run("slim", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			codec.Decode(data, nil, nil)
		}
	})
}

// printable reports whether s holds only printable text, as the model promises of a pod's labels.
func printable(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}
