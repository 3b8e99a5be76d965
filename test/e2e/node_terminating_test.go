package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestNodeServingTerminating rolls out a Deployment behind a headless service on the real node,
// with kubetree's Corefile given serving_terminating: the old pods keep serving through a preStop
// hook for their grace period, and the new ones are not ready for their readiness probe's initial
// delay. While every endpoint is terminating, the service's name answers the old pods (and their
// addresses' PTR records name them) instead of NXDOMAIN; once a new pod is ready, only the new
// ones, although the old pods are still terminating.
func TestNodeServingTerminating(t *testing.T) {
	if os.Getenv("KUBETREE_E2E_NODE") == "" {
		t.Skip("needs root and a node; run `make e2e-node` (sets KUBETREE_E2E_NODE=1)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("TestNodeServingTerminating needs root: run `make e2e-node` as root")
	}
	n := startNode(t, direct)
	n.enableServingTerminating(t)

	svc := k8stest.HeadlessService("baz", "roll", k8stest.TCP("http", 80))
	svc.Spec.Selector = map[string]string{"app": "roll"}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(80)
	n.service(t, svc)
	d := rollDeployment("v1")
	if _, err := n.client.AppsV1().Deployments("baz").Create(bg, d, meta.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := n.rolledOut(t, "v1")

	// The rollout: every old pod deleted at once (maxUnavailable 100%), the new ones not ready
	// for 20 s. The old pods' endpoints are terminating and serving, not ready.
	// The deployment controller writes the deployment's status meanwhile: an update may conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := n.client.AppsV1().Deployments("baz").Get(bg, "roll", meta.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Labels["version"] = "v2"
		_, err = n.client.AppsV1().Deployments("baz").Update(bg, d, meta.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old endpoints of roll terminating and serving, none ready", 30*time.Second, func() bool {
		states := n.endpointStates(t, "roll")
		return !slices.Contains(states, "ready") && strings.Count(strings.Join(states, " "), "serving-terminating") == len(old)
	}, func() string { return fmt.Sprint(n.endpointStates(t, "roll")) })
	out, err := n.dnsq("roll")
	if got := sortedLines(out); err != nil || !slices.Equal(got, old) {
		t.Errorf("while every endpoint terminates: dnsq roll = %q (%v), want the old pods %q", got, err, old)
	}
	out, err = n.dnsq("-t", "ptr", old[0])
	if want := strings.ReplaceAll(old[0], ".", "-") + ".roll.baz.svc.cluster.local."; err != nil || strings.TrimSpace(out) != want {
		t.Errorf("while every endpoint terminates: PTR of %s = %q (%v), want %q", old[0], out, err, want)
	}
	report(t, "while every endpoint of roll is terminating and serving, kubetree answers %v", old)

	// A new pod ready: only the ready ones, though the old pods are still terminating (asked by
	// SRV, a name not yet asked: the cache holds the A records above for their TTL).
	eventually(t, "a new endpoint of roll ready", 60*time.Second, func() bool {
		return slices.Contains(n.endpointStates(t, "roll"), "ready")
	}, func() string { return fmt.Sprint(n.endpointStates(t, "roll")) })
	var srv []string
	eventually(t, "SRV of roll to name only ready pods", 30*time.Second, func() bool {
		out, err := n.dnsq("-t", "srv", "_http._tcp.roll.baz.svc.cluster.local")
		srv = sortedLines(out)
		ready := n.readyAddrs(t, "roll")
		if err != nil || len(srv) == 0 || len(srv) != len(ready) {
			return false
		}
		for i, r := range ready {
			if !strings.HasSuffix(srv[i], " "+strings.ReplaceAll(r, ".", "-")+".roll.baz.svc.cluster.local.") {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("SRV %q, endpoints %v", srv, n.endpointStates(t, "roll")) })
	if states := n.endpointStates(t, "roll"); !slices.Contains(states, "serving-terminating") {
		t.Errorf("the old pods were gone before the check (%v): it showed nothing about them", states)
	}
	for _, r := range srv {
		for _, o := range old {
			if strings.Contains(r, strings.ReplaceAll(o, ".", "-")+".") {
				t.Errorf("SRV with a new pod ready names the terminating pod %s: %q", o, srv)
			}
		}
	}
}

// rollDeployment is baz/roll: two dnsq pods that take 60 s to terminate (a preStop hook that
// sleeps), become ready 20 s after they start, and are all replaced at once on a rollout.
func rollDeployment(version string) *apps.Deployment {
	labels := map[string]string{"app": "roll", "version": version}
	pod := dnsqPod("")
	grace := int64(60)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	c := &pod.Spec.Containers[0]
	c.Lifecycle = &api.Lifecycle{PreStop: &api.LifecycleHandler{Exec: &api.ExecAction{Command: []string{"/dnsq", "-t", "sleep"}}}}
	c.ReadinessProbe = &api.Probe{ProbeHandler: api.ProbeHandler{Exec: &api.ExecAction{Command: []string{"/dnsq", "-t", "conf"}}},
		InitialDelaySeconds: 20, PeriodSeconds: 1}
	all := intstr.FromString("100%")
	zero := intstr.FromInt32(0)
	return &apps.Deployment{
		ObjectMeta: meta.ObjectMeta{Name: "roll"},
		Spec: apps.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &meta.LabelSelector{MatchLabels: map[string]string{"app": "roll"}},
			Strategy: apps.DeploymentStrategy{Type: apps.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &apps.RollingUpdateDeployment{MaxUnavailable: &all, MaxSurge: &zero}},
			Template: api.PodTemplateSpec{ObjectMeta: meta.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
}

// rolledOut waits for baz/roll's pods of version to be ready, and returns their addresses, sorted.
func (n *node) rolledOut(t *testing.T, version string) []string {
	t.Helper()
	var ips []string
	eventually(t, "roll "+version+" ready", 90*time.Second, func() bool {
		ips = n.readyAddrs(t, "roll")
		return len(ips) == 2
	}, func() string { return fmt.Sprint(n.endpointStates(t, "roll")) })
	return ips
}

// endpointStates are the conditions of a service's endpoints, sorted: ready, serving-terminating,
// or other.
func (n *node) endpointStates(t *testing.T, svc string) []string {
	t.Helper()
	var out []string
	for _, s := range n.slicesOf(t, svc) {
		for _, e := range s.Endpoints {
			c := e.Conditions
			switch {
			case c.Ready == nil || *c.Ready:
				out = append(out, "ready")
			case (c.Serving == nil || *c.Serving) && c.Terminating != nil && *c.Terminating:
				out = append(out, "serving-terminating")
			default:
				out = append(out, "other")
			}
		}
	}
	slices.Sort(out)
	return out
}

// slicesOf are the EndpointSlices of service svc in baz.
func (n *node) slicesOf(t *testing.T, svc string) []discovery.EndpointSlice {
	t.Helper()
	l, err := n.client.DiscoveryV1().EndpointSlices("baz").List(bg, meta.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// readyAddrs are the addresses of a service's ready endpoints, sorted.
func (n *node) readyAddrs(t *testing.T, svc string) []string {
	t.Helper()
	var out []string
	for _, s := range n.slicesOf(t, svc) {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// enableServingTerminating adds serving_terminating to kubetree's stanza in deploy/'s ConfigMap,
// restarts kubetree's Deployment and waits until only pods started with it serve.
func (n *node) enableServingTerminating(t *testing.T) {
	t.Helper()
	cms := n.client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(bg, "kubetree", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = "        ttl 30\n"
	if !strings.Contains(cm.Data["Corefile"], ttl) {
		t.Fatalf("kubetree's Corefile has no %q to add the option after:\n%s", ttl, cm.Data["Corefile"])
	}
	cm.Data["Corefile"] = strings.Replace(cm.Data["Corefile"], ttl, ttl+"        serving_terminating\n", 1)
	if _, err := cms.Update(bg, cm, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := n.kubectlRun("-n", "kube-system", "rollout", "restart", "deployment/kubetree"); err != nil {
		t.Fatalf("rollout restart: %v\n%s", err, out)
	}
	if out, err := n.kubectlRun("-n", "kube-system", "rollout", "status", "deployment/kubetree", "--timeout=180s"); err != nil {
		t.Fatalf("rollout status: %v\n%s", err, out)
	}
}

// sortedLines are the non-empty lines of out, trimmed and sorted.
func sortedLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}
