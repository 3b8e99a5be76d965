package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRollouts is make rollouts (issue 39), a benchmark: it reports and does not assert. On a
// kubeadm cluster of three nodes (hack/kubeadm-cluster.sh), kubeadm's CoreDNS Deployment at three
// replicas serves first with the in-tree plugin, then, switched by docs/migrating.md's blocks, with
// kubetree: the same Deployment, Service and readiness probe. Each operation an operator does to
// the cluster DNS runs while every node's client pods ask at a steady pace, as four kinds of client
// at once: udp (a socket per lookup, as glibc's and Go's resolvers), udp-connected (one connected
// socket kept, as a pooled resolver), tcp, and nodelocal (a socket per lookup on the node's
// NodeLocal DNSCache, deploy/nodelocal/, which asks the cluster DNS over TCP). It writes one table to _out/rollouts.md (bench/ROLLOUTS.md
// keeps a run): for each plugin, operation and client, the lookups, how many failed, how many were
// answered only on the resolver's retry, and their latency.
func TestRollouts(t *testing.T) {
	if os.Getenv("KUBETREE_E2E_ROLLOUTS") == "" {
		t.Skip("a benchmark on a kubeadm cluster (root): make rollouts")
	}
	if os.Geteuid() != 0 {
		t.Fatal("TestRollouts needs root (namespaces, a bridge, containerd, kubelets)")
	}
	c := startCluster(t)
	if c.nodes < 3 {
		t.Fatalf("a cluster of %d nodes: the operations need three (KUBETREE_CLUSTER_NODES=3)", c.nodes)
	}
	nodes, err := c.client.CoreV1().Nodes().List(bg, meta.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := &rolloutBench{c: c, clients: c.startClients(t, nodes.Items), started: time.Now()}
	for _, n := range b.clients {
		c.waitReady(t, "clients", "dnsq-"+n)
	}
	// The headless service's pod on the control plane's node, which no operation takes away: a
	// lookup of it fails only where the cluster DNS fails.
	b.cases, b.full = c.lookupCases(t, b.clients, "ktc-1")
	kubeadmImage := c.dnsPods(t)[0].Spec.Containers[0].Image
	b.scale(t, 3)
	release := c.pushRelease(t)
	b.startNodeLocal(t, release)

	// The in-tree plugin as kubeadm deploys it (a readiness probe every 10 s), then with the probe
	// docs/migrating.md's step 4 gives it, which kubetree's Deployment has too.
	b.measure(t, "kubernetes, kubeadm's probe", "rollout", b.rollout)
	work := t.TempDir()
	for _, block := range docBlocks(t, "docs/migrating.md", "prepare") {
		c.runDoc(t, work, block)
	}
	b.measure(t, "kubernetes", "rollout", b.rollout)
	b.planned(t, "kubernetes", "")

	for _, block := range docBlocks(t, "docs/migrating.md", "to-kubetree") {
		c.runDoc(t, work, block, "KUBETREE_IMAGE="+release)
	}
	servedBy(t, c.dnsPods(t), "kubetree", release)
	b.measure(t, "kubetree", "rollout", b.rollout)
	b.planned(t, "kubetree", "")
	// KUBETREE_ROLLOUTS_REPEAT=N measures kubetree's planned operations N times in all, for a rate
	// where one run's count is one or two lookups; the repeats' rows say which they are ("rollout #2").
	for i := 2; i <= rolloutRepeats(t); i++ {
		suffix := fmt.Sprintf(" #%d", i)
		b.measure(t, "kubetree", "rollout"+suffix, b.rollout)
		b.planned(t, "kubetree", suffix)
	}
	b.unplanned(t, "kubetree")
	b.nodeBack(t)

	// Back to the in-tree plugin (the revision before kubetree's) for its unplanned operations.
	history, _ := c.kubectlRun("-n", "kube-system", "rollout", "history", "deployment/coredns")
	t.Logf("the Deployment's revisions:\n%s", history)
	c.runDoc(t, work, "kubectl -n kube-system rollout undo deployment/coredns --to-revision="+b.revisionOf(t, "kubernetes")+
		"\nkubectl -n kube-system rollout status deployment/coredns\n")
	servedBy(t, c.dnsPods(t), "kubernetes", kubeadmImage)
	// The last operation: the cluster goes down with its node still lost.
	b.unplanned(t, "kubernetes")

	b.write(t)
	t.Logf("wrote _out/rollouts.md:\n%s", b.markdown())
}

// write puts the rows measured so far in _out/rollouts.md: after every operation, so that a run
// cut short keeps what it measured.
func (b *rolloutBench) write(t *testing.T) {
	if err := os.WriteFile(env.root+"/_out/rollouts.md", []byte(b.markdown()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rolloutBench is the cluster, its clients and the rows measured so far.
type rolloutBench struct {
	c              *cluster
	clients        []string // the nodes, each with a client pod dnsq-NODE
	cases, full    []string // dnsq loop cases: through the search path, and full names
	rows           []rolloutRow
	notes          []string
	started        time.Time
	lostNodeClient string // a node whose client pod is gone with it: not asked
}

// rolloutRow is one line of the table: one kind of client's lookups from every node through one
// operation.
type rolloutRow struct {
	plugin, operation, client string
	loopSummary
}

// rolloutClients are the kinds of client each node runs at once: dnsq -client, and nodelocal, a
// client that opens a socket per lookup on NodeLocal DNSCache (startNodeLocal), which asks the
// cluster DNS over TCP.
var rolloutClients = []string{"udp", "udp-connected", "tcp", "nodelocal"}

// rolloutPace is how often each client starts a lookup: as fast as the pods answer, nine clients
// would hold this machine's two cores at a load of 40, and a bench of overload is not one of
// rollouts.
const rolloutPace = 20 * time.Millisecond

// planned are the operations an operator chooses to do: the plugin should cost no lookup.
func (b *rolloutBench) planned(t *testing.T, plugin, suffix string) {
	b.measure(t, plugin, "drain"+suffix, b.drain)
	b.measure(t, plugin, "scale-down"+suffix, b.scaleDown)
	b.scale(t, 3)
	b.measure(t, plugin, "reload"+suffix, b.reload)
}

// rolloutRepeats is KUBETREE_ROLLOUTS_REPEAT, the times kubetree's planned operations are measured
// (default 1).
func rolloutRepeats(t *testing.T) int {
	v := os.Getenv("KUBETREE_ROLLOUTS_REPEAT")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("KUBETREE_ROLLOUTS_REPEAT=%q: a whole number of at least 1", v)
	}
	return n
}

// unplanned are the failures: the window in which lookups go unanswered is reported. The node
// lost stays down (nodeBack brings it back).
func (b *rolloutBench) unplanned(t *testing.T, plugin string) {
	b.measure(t, plugin, "kill", b.kill)
	b.measure(t, plugin, "node-loss", b.nodeLoss)
}

// measure runs op while every node's client pod asks as every kind of client, and adds a row for
// each kind. op returns once the cluster DNS has settled (every replaced pod gone, every pod
// Ready) and says what it did, for the notes.
func (b *rolloutBench) measure(t *testing.T, plugin, operation string, op func(t *testing.T) string) {
	t.Run(plugin+" "+operation, func(t *testing.T) {
		type running struct {
			client, node string
			loop         *migrationLoop
		}
		var loops []running
		for _, node := range b.clients {
			for _, client := range rolloutClients {
				cases, pod, kind := b.cases, "dnsq-"+node, client
				switch client {
				case "udp-connected":
					cases = b.full
				case "nodelocal":
					pod, kind = nodeLocalClient(node), "udp"
				}
				l := b.c.startLoop(t, "clients", pod, cases, "-client", kind, "-every", rolloutPace.String())
				loops = append(loops, running{client, node, l})
			}
		}
		logs := b.c.followDNSLogs(t)
		stopEvents := b.conntrackEvents(t, plugin+" "+operation)
		noPorts := map[string]int{}
		for _, node := range b.clients {
			noPorts[node] = udpNoPorts("dnsq-" + node)
		}
		start := time.Now()
		did := op(t)
		// The lookups asked just before the end may still be on their retry.
		time.Sleep(6 * time.Second)
		took := time.Since(start).Round(time.Second)
		stopEvents()
		var strays []string
		for _, node := range b.clients {
			if before, after := noPorts[node], udpNoPorts("dnsq-"+node); before >= 0 && after >= 0 && node != b.lostNodeClient {
				strays = append(strays, fmt.Sprintf("%s %d", node, after-before))
			}
		}
		did += "; UDP replies that found no socket in the client pods (Udp NoPorts): " + strings.Join(strays, ", ")
		shutdowns := logs()
		sums := map[string]*loopSummary{}
		for _, r := range loops {
			if r.node == b.lostNodeClient {
				r.loop.cmd.Process.Kill()
				r.loop.cmd.Wait()
				continue
			}
			s := r.loop.stop(t)
			if sums[r.client] == nil {
				sums[r.client] = &loopSummary{}
			}
			sums[r.client].merge(s)
		}
		b.lostNodeClient = ""
		lost := 0
		for _, client := range rolloutClients {
			s := *sums[client]
			b.rows = append(b.rows, rolloutRow{plugin, operation, client, s})
			report(t, "%s %s, %s: %s", plugin, operation, client, s)
			lost += s.Failed + s.Retried
			if len(s.Retries) > 0 || len(s.Failures) > 0 {
				t.Logf("%s: retried:\n  %s\nfailed:\n  %s", client, strings.Join(s.Retries, "\n  "), strings.Join(s.Failures, "\n  "))
			}
		}
		b.notes = append(b.notes, fmt.Sprintf("%s, %s (%s): %s", plugin, operation, took, did))
		b.write(t)
		if lost > 0 {
			t.Logf("the DNS pods' shutdowns:\n%s", shutdowns)
		}
	})
}

// revisionOf is the Deployment's newest revision whose pods run plugin: the in-tree plugin's is
// the one whose image is kubeadm's.
func (b *rolloutBench) revisionOf(t *testing.T, plugin string) string {
	t.Helper()
	sets, err := b.c.client.AppsV1().ReplicaSets("kube-system").List(bg, meta.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	best := -1
	for _, rs := range sets.Items {
		image := rs.Spec.Template.Spec.Containers[0].Image
		kubetree := strings.Contains(image, "kubetree/coredns")
		if kubetree != (plugin == "kubetree") {
			continue
		}
		var rev int
		fmt.Sscan(rs.Annotations["deployment.kubernetes.io/revision"], &rev)
		best = max(best, rev)
	}
	if best < 0 {
		t.Fatalf("no revision of the Deployment coredns runs %s", plugin)
	}
	return fmt.Sprint(best)
}

// markdown is the run's table, with what each operation did and the machine and build it ran on.
func (b *rolloutBench) markdown() string {
	var s strings.Builder
	rev, _ := exec.Command("git", "-C", env.root, "rev-parse", "--short", "HEAD").Output()
	fmt.Fprintf(&s, "# Rollouts, drains, scale-downs, reloads, kills and node losses under lookups\n\n")
	fmt.Fprintf(&s, "`make rollouts` (test/e2e/rollouts_test.go, TestRollouts), %s, build %s, %d cores (%s/%s), "+
		"a kubeadm cluster of %d nodes on one machine, kube-proxy %s. Each node's client pod asks %d names "+
		"(%d as full names for udp-connected) in turn, one every %s, as each kind of client at once; nodelocal asks "+
		"the node's NodeLocal DNSCache (deploy/nodelocal/: no cache for the cluster's zones, which it asks over TCP); "+
		"retried: answered only on the resolver's second try, 5 s after the first.\n\n",
		b.started.UTC().Format("2006-01-02 15:04 UTC"), strings.TrimSpace(string(rev)), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		b.c.nodes, b.c.env["PROXY_MODE"], len(b.cases), len(b.full), rolloutPace)
	fmt.Fprintf(&s, "| plugin | operation | client | lookups | failed | retried | p50 | p99 | max |\n")
	fmt.Fprintf(&s, "|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	rows := slices.Clone(b.rows)
	slices.SortStableFunc(rows, func(x, y rolloutRow) int { return strings.Compare(x.plugin, y.plugin) })
	for _, r := range rows {
		fmt.Fprintf(&s, "| %s | %s | %s | %d | %d | %d | %.1f ms | %.1f ms | %.1f ms |\n",
			r.plugin, r.operation, r.client, r.Queries, r.Failed, r.Retried, r.P50, r.P99, r.Max)
	}
	fmt.Fprintf(&s, "\nWhat each operation did (and how long it took, lookups and all):\n\n")
	for _, n := range b.notes {
		fmt.Fprintf(&s, "- %s\n", n)
	}
	fmt.Fprintf(&s, "\nThe lookups retried or failed (the first five of each row; the time is the client's clock):\n\n")
	for _, r := range rows {
		for i, l := range append(slices.Clone(r.Failures), r.Retries...) {
			if i == 5 {
				break
			}
			fmt.Fprintf(&s, "- %s %s, %s: %s\n", r.plugin, r.operation, r.client, l)
		}
	}
	return s.String()
}

// conntrackEvents records, with KUBETREE_ROLLOUTS_CONNTRACK=1, every node's conntrack events of DNS
// over UDP (to port 53; conntrack filters ports only with -p) while an operation runs, one file per
// node in _out/rollouts-conntrack/ named after it: where a lookup is lost, they say whether its entry was deleted or pointed at an
// endpoint that no longer answered. The returned func stops them.
func (b *rolloutBench) conntrackEvents(t *testing.T, name string) (stop func()) {
	if os.Getenv("KUBETREE_ROLLOUTS_CONNTRACK") == "" {
		return func() {}
	}
	dir := env.root + "/_out/rollouts-conntrack"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for _, node := range b.clients {
		out, err := os.Create(fmt.Sprintf("%s/%s-%s.log", dir, strings.NewReplacer(" ", "-", "#", "").Replace(name), node))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("nsenter", "--net="+b.c.dir+"/ns/"+node+".net", "conntrack", "-E", "-o", "timestamp", "-p", "udp", "--orig-port-dst", "53")
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	return func() {
		for _, cmd := range cmds {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
}
