package object

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/kubetree/kubetree/internal/k8stest"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodIdentitiesShared: pods with the same namespace and labels share one identity, and the
// index and the store hold nothing of them once the pods are gone.
func TestPodIdentitiesShared(t *testing.T) {
	store, index := NewPodStore(false), NewPodIndex()
	labelled := func(name, addr string) *StoredPod {
		p := k8stest.Pod("prod", name, addr)
		p.ObjectMeta = meta.ObjectMeta{Namespace: "prod", Name: name, Labels: map[string]string{"app": "web", "tier": "front"}}
		obj, err := store.SlimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*StoredPod)
	}
	web0, web1 := labelled("web-0", "10.244.1.1"), labelled("web-1", "10.244.1.2")
	index.Replace(nil, web0)
	index.Replace(nil, web1)
	a, b := index.ClientAt(netip.MustParseAddr("10.244.1.1")), index.ClientAt(netip.MustParseAddr("10.244.1.2"))
	if a == nil || b == nil || a.Identity != b.Identity {
		t.Fatalf("two pods of one namespace with the same labels do not share an identity: %v %v", a, b)
	}
	if n := store.identityCount(); n != 1 {
		t.Errorf("the store holds %d identities, want 1", n)
	}
	other := k8stest.Pod("prod", "db-0", "10.244.1.3")
	other.Labels = map[string]string{"app": "db"}
	if obj, err := store.SlimPod(other); err != nil || obj.(*StoredPod).Identity == a.Identity {
		t.Errorf("a pod with other labels shares the identity (%v)", err)
	}
	index.Replace(web0, nil)
	index.Replace(web1, nil)
	a, b, web0, web1 = nil, nil, nil, nil
	if got := index.sizes(); got != [2]int{} {
		t.Errorf("the index holds %v after the pods are gone", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for store.identityCount() != 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := store.identityCount(); n != 0 {
		t.Errorf("the store holds %d identities after their pods are gone", n)
	}
}
