package e2e

import (
	"fmt"
	"testing"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t testing.TB, name string) string {
	t.Helper()
	_, err := env.client.CoreV1().Namespaces().Create(bg, k8stest.Namespace(name), meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No controller-manager runs to empty a deleted namespace: its services and slices would
		// stay and be served to the tests that follow.
		if list, err := env.client.CoreV1().Services(name).List(bg, meta.ListOptions{}); err == nil {
			for _, s := range list.Items { // services have no deletecollection
				env.client.CoreV1().Services(name).Delete(bg, s.Name, meta.DeleteOptions{})
			}
		}
		env.client.DiscoveryV1().EndpointSlices(name).DeleteCollection(bg, meta.DeleteOptions{}, meta.ListOptions{})
		zero := int64(0) // no kubelet runs to finish a graceful deletion
		env.client.CoreV1().Pods(name).DeleteCollection(bg, meta.DeleteOptions{GracePeriodSeconds: &zero}, meta.ListOptions{})
		env.client.CoreV1().Namespaces().Delete(bg, name, meta.DeleteOptions{})
	})
	return name
}

func createService(t testing.TB, s *api.Service) *api.Service {
	t.Helper()
	out, err := env.client.CoreV1().Services(s.Namespace).Create(bg, s, meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func deleteService(t testing.TB, ns, name string) {
	t.Helper()
	if err := env.client.CoreV1().Services(ns).Delete(bg, name, meta.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func applySlice(t testing.TB, s *discovery.EndpointSlice) {
	t.Helper()
	c := env.client.DiscoveryV1().EndpointSlices(s.Namespace)
	cur, err := c.Get(bg, s.Name, meta.GetOptions{})
	if err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = c.Update(bg, s, meta.UpdateOptions{})
	} else {
		_, err = c.Create(bg, s, meta.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func svcName(ns, name string) string { return fmt.Sprintf("%s.%s.svc.cluster.local.", name, ns) }

// runningPod creates a pod and gives it the status a kubelet would: Running, with addrs as its
// addresses. No kubelet runs here; loopback addresses let a test send queries from the pod's address.
func runningPod(t testing.TB, ns, name string, labels map[string]string, addrs ...string) {
	t.Helper()
	runningPodOn(t, ns, name, "", labels, addrs...)
}

// runningPodOn is runningPod scheduled to node ("": none).
func runningPodOn(t testing.TB, ns, name, node string, labels map[string]string, addrs ...string) {
	t.Helper()
	p := k8stest.OnNode(k8stest.Pod(ns, name, addrs...), node)
	p.Labels = labels
	p.Spec.Containers = []api.Container{{Name: "c", Image: "none"}}
	// The API server drops the status of a pod it creates: it is set the way a kubelet sets it.
	created, err := env.client.CoreV1().Pods(ns).Create(bg, p, meta.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = p.Status
	if _, err := env.client.CoreV1().Pods(ns).UpdateStatus(bg, created, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
