package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	api "k8s.io/api/core/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// testClusterMigration follows docs/migrating.md on the kubeadm cluster as an operator would:
// the shell blocks the doc marks `test:to-kubetree` run verbatim (with KUBETREE_IMAGE, step 2's
// image, kubetree's release pushed to the cluster's registry) against kubeadm's own coredns
// Deployment, ConfigMap and system:coredns role; then the blocks marked `test:back`. A client pod
// on every node asks every kind of name without pause, over UDP and TCP in turn, through its
// resolv.conf, from before the first command until the replaced pods have exited. A lookup that
// fails fails the test; one answered only on the resolver's retry is counted and reported
// (issue 39's subject: the doc says how many a switch costs today).
func testClusterMigration(t *testing.T, c *cluster, clients []string) {
	const ns = "clients"
	cases, _ := c.lookupCases(t, clients, clients[len(clients)-1])

	kubeadmImage := c.dnsPods(t)[0].Spec.Containers[0].Image
	release := c.pushRelease(t)
	prepare := docBlocks(t, "docs/migrating.md", "prepare")
	to, back := docBlocks(t, "docs/migrating.md", "to-kubetree"), docBlocks(t, "docs/migrating.md", "back")
	if len(prepare) == 0 || len(to) == 0 || len(back) == 0 {
		t.Fatalf("docs/migrating.md marks %d blocks test:prepare, %d test:to-kubetree and %d test:back", len(prepare), len(to), len(back))
	}
	report(t, "%d commands from docs/migrating.md", shellCommands(prepare)+shellCommands(to)+shellCommands(back))
	work := t.TempDir() // the operator's working directory: step 4 writes its Corefile there
	// Step 4's probe for the in-tree pods: a rollout of its own, before the clients ask.
	old := c.dnsPods(t)
	for _, b := range prepare {
		c.runDoc(t, work, b)
	}
	c.waitGone(t, old...)

	// switchDNS runs the blocks with the clients asking, waits for the pods they replace to
	// exit, and fails the test on a failed lookup.
	switchDNS := func(t *testing.T, what, row string, blocks []string) loopSummary {
		loops := make([]*migrationLoop, len(clients))
		for i, pod := range clients {
			loops[i] = c.startLoop(t, ns, "dnsq-"+pod, cases)
		}
		old := c.dnsPods(t)
		logs := c.followDNSLogs(t)
		for _, b := range blocks {
			c.runDoc(t, work, b, "KUBETREE_IMAGE="+release)
		}
		c.waitGone(t, old...)
		shutdowns := logs()
		var all loopSummary
		for i, l := range loops {
			s := l.stop(t)
			report(t, "%s, from %s: lookups %d failed %d retried %d%s", what, clients[i], s.Queries, s.Failed, s.Retried,
				strings.Join(append([]string{""}, s.Retries...), "\n  retried: "))
			all.merge(s)
		}
		report(t, "%s: %s", what, all)
		c.results = append(c.results, clusterResult{row, all})
		if all.Retried > 0 || all.Failed > 0 {
			t.Logf("%s: the replaced DNS pods' shutdowns, to set beside the lookups' times:\n%s", what, shutdowns)
		}
		if all.Failed > 0 || all.UDP == 0 || all.TCP == 0 {
			t.Errorf("through %s, %d of %d lookups failed (UDP %d, TCP %d):\n%s", what, all.Failed, all.Queries, all.UDP, all.TCP, strings.Join(all.Failures, "\n"))
		}
		return all
	}
	t.Run("to kubetree, by the doc's steps 4 and 5", func(t *testing.T) {
		switchDNS(t, "migration to kubetree", "to kubetree", to)
		servedBy(t, c.dnsPods(t), "kubetree", release)
	})
	t.Run("back, by the doc's section 5", func(t *testing.T) {
		switchDNS(t, "migration back", "back to the in-tree plugin", back)
		servedBy(t, c.dnsPods(t), "kubernetes", kubeadmImage)
	})
	// kubetree again (the revision before the last), then a rollout of it. Each leaving kubetree
	// pod stays ready until kube-proxy has taken it out of its rules, then drains until kube-proxy
	// has deleted its conntrack entries (internal/watcher/drain.go): a client that opens a socket
	// per lookup, as these do, has no question in flight to it when they go. So a rollout of
	// kubetree costs them no lookup, and one answered only on the resolver's retry fails the test
	// (issue 39). The switch back to kubetree replaces the in-tree plugin's pods, which do not
	// drain: its retries are reported only.
	t.Run("a rollout of kubetree", func(t *testing.T) {
		switchDNS(t, "kubetree again", "to kubetree again (`rollout undo`)", []string{"kubectl -n kube-system rollout undo deployment/coredns\n" +
			"kubectl -n kube-system rollout status deployment/coredns\n"})
		servedBy(t, c.dnsPods(t), "kubetree", release)
		rollout := switchDNS(t, "rollout of kubetree", "a `rollout restart` of kubetree", []string{"kubectl -n kube-system rollout restart deployment/coredns\n" +
			"kubectl -n kube-system rollout status deployment/coredns\n"})
		servedBy(t, c.dnsPods(t), "kubetree", release)
		if rollout.Retried > 0 {
			t.Errorf("a rollout of kubetree: %d of %d lookups answered only on the resolver's retry:\n%s", rollout.Retried, rollout.Queries, strings.Join(rollout.Retries, "\n"))
		}
	})
	t.Run("kubeadm upgrade, by the doc's section 6", func(t *testing.T) {
		c.upgradeAfterMigration(t, release, clients, cases)
	})
}

// lookupCases makes the names that the client pods in namespace clients ask (a ClusterIP service,
// a headless one whose pod h1 is on node h1Node, so that the other nodes' clients ask across the
// pod network, an ExternalName) and returns dnsq loop cases for them: as an application writes
// them (short names through the search path) and as full names (for a client without a search list).
func (c *cluster) lookupCases(t *testing.T, clients []string, h1Node string) (cases, full []string) {
	t.Helper()
	const ns = "clients"
	web := c.service(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	c.service(t, k8stest.ExternalNameService(ns, "ext", "www.example.test"))
	h1 := c.dnsqPod("h1", h1Node)
	hl := c.headlessService(t, ns, h1)
	for _, pod := range clients {
		out, err := c.kubectlRun("-n", ns, "exec", "dnsq-"+pod, "--", "/dnsq", "h1.hl")
		if got := strings.TrimSpace(out); err != nil || got != hl {
			t.Fatalf("h1.hl from dnsq-%s = %q (%v), want %s", pod, got, err, hl)
		}
	}
	srv := "srv:_http._tcp.hl.clients.svc.cluster.local=0 100 80 h1.hl.clients.svc.cluster.local."
	cname := "cname:ext.clients.svc.cluster.local=www.example.test."
	outside := "a:api.example.test=198.51.100.8"
	cases = []string{"a:web=" + web.Spec.ClusterIP, "a:web.clients=" + web.Spec.ClusterIP, "a:hl=" + hl, "a:h1.hl=" + hl,
		srv, cname, "a:ext=198.51.100.7", outside}
	full = []string{"a:web.clients.svc.cluster.local=" + web.Spec.ClusterIP, "a:hl.clients.svc.cluster.local=" + hl,
		"a:h1.hl.clients.svc.cluster.local=" + hl, srv, cname, outside}
	return cases, full
}

// followDNSLogs follows the logs of the DNS pods running now, and returns a function that stops
// and returns their lines about shutting down (lameduck, drain), each with its pod and time.
func (c *cluster) followDNSLogs(t *testing.T) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.kubectl, "--kubeconfig", c.kubeconfig, "-n", "kube-system", "logs", "-f",
		"-l", "k8s-app=kube-dns", "--prefix", "--timestamps", "--max-log-requests", "10", "--tail", "0")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Logf("following the DNS pods' logs: %v", err)
		cancel()
		return func() string { return "" }
	}
	return func() string {
		cancel()
		cmd.Wait()
		var lines []string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "draining") || strings.Contains(l, "lameduck") || strings.Contains(l, "SIGTERM") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
}

// merge adds another loop's lookups to s; its percentiles are over both.
func (s *loopSummary) merge(o loopSummary) {
	s.Queries += o.Queries
	s.UDP += o.UDP
	s.TCP += o.TCP
	s.Failed += o.Failed
	s.Retried += o.Retried
	s.Failures = append(s.Failures, o.Failures...)
	s.Retries = append(s.Retries, o.Retries...)
	s.Took = append(s.Took, o.Took...)
	slices.Sort(s.Took)
	at := func(q float64) float64 {
		if len(s.Took) == 0 {
			return 0
		}
		return s.Took[int(q*float64(len(s.Took)-1))]
	}
	s.P50, s.P99, s.Max = at(0.5), at(0.99), at(1)
}

// dnsPods are the cluster DNS's pods that are not on their way out (kubeadm's label).
func (c *cluster) dnsPods(t *testing.T) []api.Pod {
	t.Helper()
	pods := c.livePods(t, "k8s-app=kube-dns")
	if len(pods) == 0 {
		t.Fatal("no pod of the cluster DNS (k8s-app=kube-dns) in kube-system")
	}
	return pods
}

// dnsqPod is a client pod on node, from the dnsq image in the cluster's registry.
func (c *cluster) dnsqPod(name, node string) *api.Pod {
	pod := dnsqPod(name)
	pod.Spec.NodeName = node
	pod.Spec.Tolerations = []api.Toleration{{Key: "node-role.kubernetes.io/control-plane", Effect: api.TaintEffectNoSchedule}}
	pod.Spec.Containers[0].Image = c.dnsqImage
	pod.Spec.Containers[0].ImagePullPolicy = api.PullIfNotPresent
	return pod
}

// pushRelease pushes kubetree's release image (make release: _out/release/latest/image) to the
// cluster's registry, as docs/migrating.md's step 2 has the operator do, and returns its
// reference by digest.
func (c *cluster) pushRelease(t *testing.T) string {
	return c.pushReleased(t, "image", "kubetree/coredns")
}

// pushReleased pushes one of the release's image layouts to repo in the cluster's registry, tagged
// with the release's version, and returns its reference by digest.
func (c *cluster) pushReleased(t *testing.T, layout, repo string) string {
	t.Helper()
	rel := filepath.Join(env.root, "_out/release/latest")
	version, err := os.ReadFile(rel + "/VERSION")
	if err != nil {
		t.Fatalf("kubetree's release (make release): %v", err)
	}
	out, err := exec.Command(filepath.Join(env.root, "bin/release"), "push", "-layout", filepath.Join(rel, layout),
		"-to", c.env["REGISTRY"]+"/"+repo+":"+strings.TrimSpace(string(version)),
		"-ca", c.dir+"/registry/pki/ca.crt").CombinedOutput()
	if err != nil {
		t.Fatalf("pushing the release's %s to the cluster's registry: %v\n%s", layout, err, out)
	}
	return strings.TrimSpace(string(out))
}

// pushDNSQ pushes the release's dnsq image, the one its kubectl plugin's doctor names by digest,
// and returns its reference in the cluster's registry: the client pods and the doctor use it.
func (c *cluster) pushDNSQ(t *testing.T) string {
	t.Helper()
	ref := c.pushReleased(t, "dnsq-image", "kubetree/dnsq")
	released, err := os.ReadFile(filepath.Join(env.root, "_out/release/latest/dnsq.ref"))
	if err != nil {
		t.Fatal(err)
	}
	_, digest, _ := strings.Cut(strings.TrimSpace(string(released)), "@")
	if !strings.HasSuffix(ref, "@"+digest) {
		t.Fatalf("the release's dnsq image is %s; pushed to the cluster's registry it is %s", released, ref)
	}
	return ref
}

// runDoc runs one of the doc's shell blocks as written, in dir, with the cluster's kubeconfig,
// our kubectl first on PATH, and vars.
func (c *cluster) runDoc(t *testing.T, dir, block string, vars ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig, "PATH="+filepath.Join(env.root, "bin")+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, vars...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the block failed: %v\n%s\n---\n%s", err, block, out)
	}
}

// docBlocks are the fenced blocks of a doc whose info string carries test:TAG, in the doc's
// order, each without the indentation of the list item it sits in.
func docBlocks(t *testing.T, doc, tag string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, doc))
	if err != nil {
		t.Fatal(err)
	}
	open := regexp.MustCompile(`^(\s*)(~~~|` + "```" + `)\s*\w+\s+test:` + regexp.QuoteMeta(tag) + `\s*$`)
	var blocks []string
	var block []string
	indent, fence := "", ""
	for sc := bufio.NewScanner(strings.NewReader(string(b))); sc.Scan(); {
		line := sc.Text()
		if fence == "" {
			if m := open.FindStringSubmatch(line); m != nil {
				indent, fence, block = m[1], m[2], nil
			}
			continue
		}
		if strings.TrimSpace(line) == fence {
			blocks = append(blocks, strings.Join(block, "\n")+"\n")
			fence = ""
			continue
		}
		block = append(block, strings.TrimPrefix(line, indent))
	}
	if fence != "" {
		t.Fatalf("%s: a block test:%s is not closed", doc, tag)
	}
	return blocks
}

// shellCommands counts the commands in shell blocks: their lines but comments, blank lines,
// continuations (a trailing backslash, or a single-quoted string still open) and here-documents'
// bodies.
func shellCommands(blocks []string) int {
	n := 0
	for _, b := range blocks {
		continued, quoted, heredoc := false, false, ""
		for line := range strings.Lines(b) {
			line = strings.TrimRight(line, "\n")
			wasQuoted := quoted
			if strings.Count(line, "'")%2 == 1 {
				quoted = !quoted
			}
			switch {
			case heredoc != "":
				if strings.TrimSpace(line) == heredoc {
					heredoc = ""
				}
				continue
			case continued || wasQuoted:
			case strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
				continue
			default:
				n++
			}
			continued = strings.HasSuffix(line, `\`)
			if _, word, ok := strings.Cut(line, "<<"); ok {
				heredoc = strings.Trim(strings.Fields(word)[0], `'"-`)
			}
		}
	}
	return n
}

// String names a loop's tally for a report line.
func (s loopSummary) String() string {
	return fmt.Sprintf("lookups %d failed %d retried %d p50 %.1f ms p99 %.1f ms", s.Queries, s.Failed, s.Retried, s.P50, s.P99)
}
