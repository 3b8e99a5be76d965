package replica

import (
	"context"
	"errors"
	"strings"
	"testing"

	authz "k8s.io/api/authorization/v1"
	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var bg = context.Background()

func dnsService() *api.Service {
	return &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"},
		Spec: api.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"}}}
}

func dnsPod(name string, phase api.PodPhase) *api.Pod {
	return &api.Pod{ObjectMeta: meta.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"k8s-app": "kube-dns"}},
		Status: api.PodStatus{Phase: phase}}
}

func TestPodsAreTheRunningPodsBehindTheService(t *testing.T) {
	other := dnsPod("other", api.PodRunning)
	other.Labels = map[string]string{"app": "other"}
	c := fake.NewClientset(dnsService(), dnsPod("kubetree-b", api.PodRunning), dnsPod("kubetree-a", api.PodRunning), dnsPod("kubetree-c", api.PodPending), other)
	pods, err := Pods(bg, c, DefaultService)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "kubetree-a,kubetree-b" {
		t.Errorf("pods %s, want kubetree-a,kubetree-b (running, selected, by name)", got)
	}
}

func TestPodsOfADNSScaledToZero(t *testing.T) {
	_, err := Pods(bg, fake.NewClientset(dnsService()), DefaultService)
	if !errors.Is(err, ErrNoReplicas) || !strings.Contains(err.Error(), "scaled to zero") {
		t.Errorf("err = %v, want ErrNoReplicas asking whether the Deployment is scaled to zero", err)
	}
	_, err = Pods(bg, fake.NewClientset(), DefaultService)
	if err == nil || !strings.Contains(err.Error(), "no Service kube-system/kube-dns") || !strings.Contains(err.Error(), "--dns-service") {
		t.Errorf("err = %v, want the missing Service named and --dns-service offered", err)
	}
}

func TestPick(t *testing.T) {
	pods := []api.Pod{*dnsPod("kubetree-a", api.PodRunning), *dnsPod("kubetree-b", api.PodRunning)}
	got, err := Pick(pods, "pod/kubetree-b")
	if err != nil || len(got) != 1 || got[0].Name != "kubetree-b" {
		t.Errorf("Pick(pod/kubetree-b) = %v, %v", got, err)
	}
	if got, _ := Pick(pods, ""); len(got) != 2 {
		t.Errorf("Pick(\"\") = %d pods, want all", len(got))
	}
	if _, err := Pick(pods, "kubetree-z"); err == nil || !strings.Contains(err.Error(), "kubetree-a, kubetree-b") {
		t.Errorf("Pick(kubetree-z) = %v, want the running pods named", err)
	}
}

func TestParseService(t *testing.T) {
	if s, err := ParseService("intree/dns"); err != nil || s != (Service{"intree", "dns"}) {
		t.Errorf("ParseService(intree/dns) = %v, %v", s, err)
	}
	for _, bad := range []string{"dns", "/dns", "a/", "a/b/c"} {
		if _, err := ParseService(bad); err == nil {
			t.Errorf("ParseService(%q): no error", bad)
		}
	}
}

// TestNeedNamesWhatRBACForbids: a user without pods/portforward is told the verb and resource.
func TestNeedNamesWhatRBACForbids(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authz.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		r.Status.Allowed = !(ra.Resource == "pods" && ra.Subresource == "portforward")
		return true, r, nil
	})
	if err := Need(bg, c, Permission{Verb: "get", Resource: "pods", Namespace: "kube-system"}); err != nil {
		t.Errorf("Need(get pods) = %v, want nil", err)
	}
	err := Need(bg, c, ForwardPermission("kube-system"))
	for _, want := range []string{"RBAC forbids", `verb "create"`, `resource "pods/portforward"`, "kube-system", "kubectl auth can-i create pods/portforward -n kube-system"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Need(create pods/portforward) = %v, want it to say %q", err, want)
		}
	}
}
