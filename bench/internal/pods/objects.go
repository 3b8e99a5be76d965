package pods

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// createPod creates a running pod with one address.
func createPod(ctx context.Context, cp *measure.ControlPlane, ns, name, addr string, labels map[string]string) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	created, err := cp.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: addr, PodIPs: []corev1.PodIP{{IP: addr}}}
	_, err = cp.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// createPods creates pods from..to-1, running, with their addresses.
func createPods(ctx context.Context, cp *measure.ControlPlane, workers, from, to, namespaces int) error {
	return measure.Parallel(ctx, workers, from, to, "created pods", func(n int) error {
		return createPod(ctx, cp, podNS(n%namespaces), fmt.Sprintf("pod-%06d", n), podAddr(n, 0), podLabels(n))
	})
}

// movePods gives pods 0..n-1 their next address.
func movePods(ctx context.Context, cp *measure.ControlPlane, workers, n, namespaces int) error {
	return measure.Parallel(ctx, workers, 0, n, "moved pods", func(i int) error {
		c := cp.Client.CoreV1().Pods(podNS(i % namespaces))
		p, err := c.Get(ctx, fmt.Sprintf("pod-%06d", i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		addr := podAddr(i, 1)
		p.Status.PodIP, p.Status.PodIPs = addr, []corev1.PodIP{{IP: addr}}
		_, err = c.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}
