package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The operations of TestRollouts. Each returns once the cluster DNS has settled, and says what it did.

// rollout is a rolling update of the Deployment (a new pod template, as a new image or ConfigMap
// hash makes).
func (b *rolloutBench) rollout(t *testing.T) string {
	old := b.c.dnsPods(t)
	b.kubectl(t, "-n", "kube-system", "rollout", "restart", "deployment/coredns")
	b.kubectl(t, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout", "5m")
	b.c.waitGone(t, old...)
	return fmt.Sprintf("kubectl rollout restart: %d pods replaced", len(old))
}

// drain drains the node of a DNS pod as an operator drains a node for maintenance (its DNS pods
// evicted; the other pods of a node are the same to the cluster DNS), then uncordons it.
func (b *rolloutBench) drain(t *testing.T) string {
	victim := b.dnsPodOffTheControlPlane(t)
	b.kubectl(t, "drain", victim.Spec.NodeName, "--pod-selector", "k8s-app=kube-dns", "--ignore-daemonsets", "--timeout", "3m")
	b.kubectl(t, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout", "3m")
	b.c.waitGone(t, victim)
	b.kubectl(t, "uncordon", victim.Spec.NodeName)
	return "kubectl drain " + victim.Spec.NodeName + " evicted " + victim.Name
}

// scaleDown takes the Deployment from three replicas to two.
func (b *rolloutBench) scaleDown(t *testing.T) string {
	before := b.c.dnsPods(t)
	b.kubectl(t, "-n", "kube-system", "scale", "deployment/coredns", "--replicas", "2")
	var gone []api.Pod
	eventually(t, "one DNS pod to leave", time.Minute, func() bool {
		gone = gone[:0]
		live := map[string]bool{}
		for _, p := range b.c.dnsPods(t) {
			live[p.Name] = true
		}
		for _, p := range before {
			if !live[p.Name] {
				gone = append(gone, p)
			}
		}
		return len(gone) == 1
	})
	b.c.waitGone(t, gone...)
	return "kubectl scale --replicas 2: " + gone[0].Name + " left"
}

// scale sets the Deployment's replicas and waits until each is Ready: between operations.
func (b *rolloutBench) scale(t *testing.T, replicas int) {
	t.Helper()
	b.kubectl(t, "-n", "kube-system", "scale", "deployment/coredns", "--replicas", fmt.Sprint(replicas))
	b.kubectl(t, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout", "3m")
}

// reload changes the Corefile in the ConfigMap the pods mount (the cache's TTL, one second more:
// CoreDNS's reload plugin compares the parsed Corefile, so a comment would not do) and waits
// until every DNS pod has reloaded it in process.
func (b *rolloutBench) reload(t *testing.T) string {
	dep, err := b.c.client.AppsV1().Deployments("kube-system").Get(bg, "coredns", meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := dep.Spec.Template.Spec.Volumes[0].ConfigMap.Name
	cms := b.c.client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(bg, name, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := b.c.dnsPods(t)
	before := map[string]int{}
	for _, p := range pods {
		before[p.Name] = b.reloads(t, p.Name)
	}
	ttl := cacheTTL.FindStringSubmatch(cm.Data["Corefile"])
	if ttl == nil {
		t.Fatalf("ConfigMap %s: no `cache TTL` in its Corefile to change:\n%s", name, cm.Data["Corefile"])
	}
	n, _ := strconv.Atoi(ttl[2])
	cm.Data["Corefile"] = strings.Replace(cm.Data["Corefile"], ttl[0], ttl[1]+strconv.Itoa(n+1), 1)
	if _, err := cms.Update(bg, cm, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, p := range pods {
		// The kubelet refreshes a ConfigMap volume within its sync period (a minute), and the
		// reload plugin looks every 30 s (± 15 s).
		eventually(t, p.Name+" to reload its Corefile", 4*time.Minute, func() bool { return b.reloads(t, p.Name) > before[p.Name] })
	}
	return fmt.Sprintf("ConfigMap %s's cache TTL from %d s to %d s; every pod had reloaded it %s later", name, n, n+1, time.Since(start).Round(time.Second))
}

// cacheTTL is the cache plugin's line with its TTL in a Corefile.
var cacheTTL = regexp.MustCompile(`(?m)^(\s*cache )([0-9]+)`)

// reloads counts the times a DNS pod's CoreDNS has reloaded its Corefile.
func (b *rolloutBench) reloads(t *testing.T, pod string) int {
	out, err := b.c.kubectlRun("-n", "kube-system", "logs", pod)
	if err != nil {
		t.Logf("logs of %s: %v", pod, err)
		return 0
	}
	return strings.Count(out, "Reloading complete")
}

// kill kills one DNS pod's CoreDNS with SIGKILL, as the kernel's OOM killer or a crash would end
// it, and waits until the kubelet has restarted it and it is Ready.
func (b *rolloutBench) kill(t *testing.T) string {
	victim := b.dnsPodOffTheControlPlane(t)
	pid := coreDNSProcess(t, victim.Name)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var notReady, ready time.Duration
	eventually(t, victim.Name+" restarted and Ready", 2*time.Minute, func() bool {
		p, err := b.c.client.CoreV1().Pods("kube-system").Get(bg, victim.Name, meta.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		if !podReady(*p) {
			if notReady == 0 {
				notReady = time.Since(killed)
			}
			return false
		}
		ready = time.Since(killed)
		return p.Status.ContainerStatuses[0].RestartCount > victim.Status.ContainerStatuses[0].RestartCount
	})
	return fmt.Sprintf("kill -9 of %s's coredns (pid %d): the pod seen not Ready after %s, Ready again after %s",
		victim.Name, pid, notReady.Round(100*time.Millisecond), ready.Round(100*time.Millisecond))
}

// nodeLoss stops the kubelet, containerd and every container of the node of a DNS pod at once,
// as a machine that fails, and waits until the pod has left the kube-dns Service's endpoints
// (the node controller marks it not Ready once the node has missed its heartbeats).
func (b *rolloutBench) nodeLoss(t *testing.T) string {
	victim := b.dnsPodOffTheControlPlane(t)
	node := victim.Spec.NodeName
	b.lostNodeClient = node
	b.clusterScript(t, "node-stop", strings.TrimPrefix(node, "ktc-"))
	lost := time.Now()
	eventually(t, victim.Name+" out of kube-dns's ready endpoints", 5*time.Minute, func() bool {
		return !b.readyEndpoint(t, victim.Status.PodIP)
	})
	left := time.Since(lost)
	// kube-proxy's sync after the endpoint left.
	time.Sleep(3 * time.Second)
	return fmt.Sprintf("node %s stopped (with %s and its client pod, whose lookups are not counted); %s left kube-dns's ready endpoints %s later",
		node, victim.Name, victim.Name, left.Round(time.Second))
}

// nodeBack starts the node nodeLoss stopped and waits until the cluster DNS is whole again.
func (b *rolloutBench) nodeBack(t *testing.T) {
	t.Helper()
	for _, n := range b.clients {
		node, err := b.c.client.CoreV1().Nodes().Get(bg, n, meta.GetOptions{})
		if err != nil || nodeReady(*node) {
			continue
		}
		b.clusterScript(t, "node-start", strings.TrimPrefix(n, "ktc-"))
		b.c.waitReady(t, "clients", "dnsq-"+n)
		b.c.waitReady(t, "clients", nodeLocalClient(n))
	}
	if out, err := b.c.kubectlRun("-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout", "5m"); err != nil {
		pods, _ := b.c.kubectlRun("-n", "kube-system", "get", "pods", "-o", "wide")
		nodes, _ := b.c.kubectlRun("get", "nodes", "-o", "wide")
		unready, _ := b.c.kubectlRun("-n", "kube-system", "describe", "pods", "-l", "k8s-app=kube-dns")
		t.Fatalf("the cluster DNS is not whole again after the node came back: %v\n%s\n%s\n%s\n%s", err, out, nodes, pods, unready)
	}
	eventually(t, "every DNS pod Ready", 5*time.Minute, func() bool {
		for _, p := range b.c.dnsPods(t) {
			if !podReady(p) {
				return false
			}
		}
		return true
	})
}

// readyEndpoint reports whether ip is a ready endpoint of the kube-dns Service.
func (b *rolloutBench) readyEndpoint(t *testing.T, ip string) bool {
	list, err := b.c.client.DiscoveryV1().EndpointSlices("kube-system").List(bg, meta.ListOptions{LabelSelector: discovery.LabelServiceName + "=kube-dns"})
	if err != nil {
		t.Logf("kube-dns's endpoint slices: %v", err)
		return true
	}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 && e.Addresses[0] == ip && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				return true
			}
		}
	}
	return false
}

// dnsPodOffTheControlPlane is a Ready DNS pod on a node other than the control plane's (ktc-1),
// whose loss leaves the API server be.
func (b *rolloutBench) dnsPodOffTheControlPlane(t *testing.T) api.Pod {
	t.Helper()
	for _, p := range b.c.dnsPods(t) {
		if p.Spec.NodeName != "ktc-1" && podReady(p) {
			return p
		}
	}
	t.Fatalf("no Ready DNS pod off the control plane's node")
	return api.Pod{}
}

// coreDNSProcess is the pid of the coredns process of pod.
func coreDNSProcess(t *testing.T, pod string) int {
	t.Helper()
	pid := podProcess(pod, "coredns")
	if pid == 0 {
		t.Fatalf("no coredns process of pod %s on this machine", pod)
	}
	return pid
}

// podProcess is the pid of a process of pod named comm (any, where comm is ""), or 0: every node's
// processes are this machine's, and a container's environment names its pod (HOSTNAME).
func podProcess(pod, comm string) int {
	environs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, e := range environs {
		if comm != "" {
			name, err := os.ReadFile(filepath.Join(filepath.Dir(e), "comm"))
			if err != nil || strings.TrimSpace(string(name)) != comm {
				continue
			}
		}
		vars, err := os.ReadFile(e)
		if err != nil || !strings.Contains("\x00"+string(vars)+"\x00", "\x00HOSTNAME="+pod+"\x00") {
			continue
		}
		var pid int
		fmt.Sscan(filepath.Base(filepath.Dir(e)), &pid)
		return pid
	}
	return 0
}

// udpNoPorts is the count of UDP datagrams that reached pod's network namespace for no socket
// (/proc/net/snmp's Udp NoPorts), read through a process of the pod; -1 when none is found. A
// client's connected socket takes a reply only from the address it asked: a reply whose source
// is a DNS pod's own address, not the Service's, because the node's conntrack entry that would
// have translated it back was deleted while the question was on its way, lands here.
func udpNoPorts(pod string) int {
	pid := podProcess(pod, "")
	if pid == 0 {
		return -1
	}
	snmp, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/snmp", pid))
	if err != nil {
		return -1
	}
	var names []string
	for line := range strings.Lines(string(snmp)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = fields
			continue
		}
		if i := slices.Index(names, "NoPorts"); i >= 0 && i < len(fields) {
			n, _ := strconv.Atoi(fields[i])
			return n
		}
	}
	return -1
}

func podReady(p api.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == api.PodReady {
			return c.Status == api.ConditionTrue
		}
	}
	return false
}

// kubectl runs kubectl against the cluster and fails the test when it fails.
func (b *rolloutBench) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := b.c.kubectlRun(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// clusterScript runs hack/kubeadm-cluster.sh VERB on the cluster's directory.
func (b *rolloutBench) clusterScript(t *testing.T, verb string, args ...string) {
	t.Helper()
	out, err := exec.Command(env.root+"/hack/kubeadm-cluster.sh", append([]string{verb, b.c.dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubeadm-cluster.sh %s: %v\n%s", verb, err, out)
	}
}
