// Package replica finds the cluster DNS's pods and reaches a pod's port through the API server's
// port-forward, as `kubectl port-forward` does.
package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	api "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// ErrNoReplicas is returned when the DNS Service selects no running pod.
var ErrNoReplicas = errors.New("no running DNS pod")

// Service names the Service in front of the cluster DNS: kube-system/kube-dns by convention,
// whatever serves it (kubetree, CoreDNS's kubernetes plugin, kube-dns).
type Service struct{ Namespace, Name string }

// DefaultService is the cluster DNS's Service in every distribution.
var DefaultService = Service{Namespace: "kube-system", Name: "kube-dns"}

func (s Service) String() string { return s.Namespace + "/" + s.Name }

// ParseService reads NAMESPACE/NAME.
func ParseService(s string) (Service, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return Service{}, fmt.Errorf("--dns-service must be NAMESPACE/NAME, such as kube-system/kube-dns, got %q", s)
	}
	return Service{Namespace: ns, Name: name}, nil
}

// Pods are the running pods behind svc, by name.
func Pods(ctx context.Context, c kubernetes.Interface, svc Service) ([]api.Pod, error) {
	s, err := c.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, meta.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("the cluster has no Service %s in front of its DNS (name another with --dns-service NAMESPACE/NAME)", svc)
	case err != nil:
		return nil, fmt.Errorf("reading the DNS Service %s: %w", svc, err)
	case len(s.Spec.Selector) == 0:
		return nil, fmt.Errorf("the DNS Service %s has no selector: its pods cannot be found", svc)
	}
	list, err := c.CoreV1().Pods(svc.Namespace).List(ctx, meta.ListOptions{LabelSelector: labels.SelectorFromSet(s.Spec.Selector).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the DNS pods of %s: %w", svc, err)
	}
	pods := slices.DeleteFunc(list.Items, func(p api.Pod) bool { return p.Status.Phase != api.PodRunning || p.DeletionTimestamp != nil })
	if len(pods) == 0 {
		return nil, fmt.Errorf("%w: the DNS Service %s selects %d pods, none running (is the DNS Deployment scaled to zero?)", ErrNoReplicas, svc, len(list.Items))
	}
	slices.SortFunc(pods, func(a, b api.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// Pick is the pod of pods named name ("": all of them).
func Pick(pods []api.Pod, name string) ([]api.Pod, error) {
	if name == "" {
		return pods, nil
	}
	name = strings.TrimPrefix(name, "pod/")
	for _, p := range pods {
		if p.Name == name {
			return []api.Pod{p}, nil
		}
	}
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return nil, fmt.Errorf("--replica %s is not a running DNS pod; they are: %s", name, strings.Join(names, ", "))
}
