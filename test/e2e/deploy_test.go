package e2e

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	authentication "k8s.io/api/authentication/v1"
	authorization "k8s.io/api/authorization/v1"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// The names deploy/ gives its objects.
const (
	deployNS        = "kube-system"
	deployName      = "kubetree" // ServiceAccount, ConfigMap, Deployment, PodDisruptionBudget
	deployRole      = "system:kubetree"
	deployDNSName   = "kube-dns"
	deployClusterIP = "10.96.0.10"
)

// TestDeployManifests applies deploy/ to the API server as a user would, then runs bin/coredns with
// the credential the Deployment's pods get — a token of the kubetree ServiceAccount — to prove that
// the ClusterRole is enough to sync and answer, and that it grants nothing more.
func TestDeployManifests(t *testing.T) {
	manifests := filepath.Join(env.root, "deploy")
	kubectl(t, "apply", "-f", manifests)
	t.Cleanup(func() {
		if out, err := kubectlRun("delete", "-f", manifests, "--ignore-not-found", "--wait=false"); err != nil {
			t.Errorf("kubectl delete -f deploy/: %v\n%s", err, out)
		}
		// Nothing holds them (no finalizers without a controller-manager): they are gone at once.
		if _, err := env.client.CoreV1().Services(deployNS).Get(bg, deployDNSName, meta.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("kube-dns still exists after kubectl delete: %v", err)
		}
		if _, err := env.client.RbacV1().ClusterRoles().Get(bg, deployRole, meta.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s still exists after kubectl delete: %v", deployRole, err)
		}
	})

	cm, err := env.client.CoreV1().ConfigMaps(deployNS).Get(bg, deployName, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	corefile := cm.Data["Corefile"]
	kubeconfig := serviceAccountKubeconfig(t, deployNS, deployName)
	sa := clientFor(t, kubeconfig)

	t.Run("objects fit together", func(t *testing.T) { checkDeployObjects(t) })
	t.Run("pod template passes PodSecurity restricted", checkPodSecurity)
	t.Run("least privilege", func(t *testing.T) { checkLeastPrivilege(t, sa) })

	t.Run("ClusterRole is enough", func(t *testing.T) {
		ns := newNamespace(t, "deploy-e2e")
		// The options of the shipped kubetree block, with the ServiceAccount's credential.
		options := append(corefileKubetreeOptions(t, corefile), "kubeconfig "+kubeconfig)
		c := startCoreDNS(t, options...)
		eventually(t, "ready", 30*time.Second, c.isReady)

		c.waitAnswer(t, deployDNSName+"."+deployNS+".svc.cluster.local.", dns.TypeA, deployClusterIP)

		// Without a controller-manager a deleted namespace keeps its objects (and stays Terminating):
		// delete them, or every later test's kubetree would still serve them.
		t.Cleanup(func() {
			for _, name := range []string{"web", "db"} {
				if err := env.client.CoreV1().Services(ns).Delete(bg, name, meta.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Error(err)
				}
			}
			if err := env.client.DiscoveryV1().EndpointSlices(ns).Delete(bg, "db-1", meta.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		})
		web := createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
		c.waitAnswer(t, svcName(ns, "web"), dns.TypeA, web.Spec.ClusterIP)
		// ttl 30 from the shipped Corefile.
		if m := c.query(t, "udp", svcName(ns, "web"), dns.TypeA); len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 30 {
			t.Errorf("want one A record with TTL 30, got %v", m)
		}

		createService(t, k8stest.HeadlessService(ns, "db", k8stest.TCP("pg", 5432)))
		applySlice(t, k8stest.Slice(ns, "db", "db-1", discovery.AddressTypeIPv4, k8stest.SlicePorts(k8stest.SlicePort("pg", api.ProtocolTCP, 5432)),
			k8stest.Endpoint{Addrs: []string{"10.1.200.1"}, Hostname: "db-0"}, k8stest.Endpoint{Addrs: []string{"10.1.200.2"}}))
		c.waitAnswer(t, svcName(ns, "db"), dns.TypeA, "10.1.200.1", "10.1.200.2")
		c.waitAnswer(t, "db-0."+svcName(ns, "db"), dns.TypeA, "10.1.200.1")

		// pods insecure, from the shipped Corefile, needs no access to pods.
		c.waitAnswer(t, "10-1-2-3."+ns+".pod.cluster.local.", dns.TypeA, "10.1.2.3")

		if out := strings.ToLower(c.out.String()); strings.Contains(out, "forbidden") {
			t.Errorf("coredns met a Forbidden with the ServiceAccount's token:\n%s", c.out.String())
		}
	})

	t.Run("pods verified with deploy/pods-verified", func(t *testing.T) {
		optional := filepath.Join(env.root, "deploy", "pods-verified")
		kubectl(t, "apply", "-f", optional)
		t.Cleanup(func() { kubectlRun("delete", "-f", optional, "--ignore-not-found") })
		ns := newNamespace(t, "deploy-verified")
		runningPod(t, ns, "client", nil, "10.1.201.5")
		c := startCoreDNS(t, "pods verified", "kubeconfig "+kubeconfig)
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitAnswer(t, "10-1-201-5."+ns+".pod.cluster.local.", dns.TypeA, "10.1.201.5")
		c.waitRcode(t, "10-1-201-6."+ns+".pod.cluster.local.", dns.TypeA, dns.RcodeNameError)
		if out := strings.ToLower(c.out.String()); strings.Contains(out, "forbidden") {
			t.Errorf("coredns met a Forbidden with the ServiceAccount's token and deploy/pods-verified:\n%s", c.out.String())
		}
	})

	t.Run("topology with deploy/pods-verified and deploy/topology", func(t *testing.T) {
		for _, dir := range []string{"pods-verified", "topology"} {
			optional := filepath.Join(env.root, "deploy", dir)
			kubectl(t, "apply", "-f", optional)
			t.Cleanup(func() { kubectlRun("delete", "-f", optional, "--ignore-not-found") })
		}
		ns := newNamespace(t, "deploy-topology")
		node := createNode(t, "deploy-topology-node", "deploy-zone")
		runningPodOn(t, ns, "client", node, nil, "10.1.203.5")
		c := startCoreDNS(t, "pods verified", "topology", "kubeconfig "+kubeconfig)
		eventually(t, "ready (nodes listed and watched)", 30*time.Second, c.isReady)
		c.waitAnswer(t, "10-1-203-5."+ns+".pod.cluster.local.", dns.TypeA, "10.1.203.5")
		if out := strings.ToLower(c.out.String()); strings.Contains(out, "forbidden") {
			t.Errorf("coredns met a Forbidden with the ServiceAccount's token, deploy/pods-verified and deploy/topology:\n%s", c.out.String())
		}
	})

	t.Run("explain's reviews with deploy/explain", func(t *testing.T) {
		optional := filepath.Join(env.root, "deploy", "explain")
		kubectl(t, "apply", "-f", optional)
		t.Cleanup(func() { kubectlRun("delete", "-f", optional, "--ignore-not-found") })
		// What explain asks of the API server for a caller off loopback, with the ServiceAccount's
		// credential: both reviews are allowed (RBAC may take a moment to see the binding).
		var err error
		eventually(t, "TokenReview and SubjectAccessReview allowed", 10*time.Second, func() bool {
			_, err = sa.AuthenticationV1().TokenReviews().Create(bg, &authentication.TokenReview{Spec: authentication.TokenReviewSpec{Token: "not-a-token"}}, meta.CreateOptions{})
			if err == nil {
				_, err = sa.AuthorizationV1().SubjectAccessReviews().Create(bg, &authorization.SubjectAccessReview{Spec: authorization.SubjectAccessReviewSpec{
					User: "someone", NonResourceAttributes: &authorization.NonResourceAttributes{Path: "/explain", Verb: "get"}}}, meta.CreateOptions{})
			}
			return err == nil
		}, func() string { return fmt.Sprint(err) })
	})

	t.Run("multicluster with deploy/multicluster", func(t *testing.T) {
		imports := serviceImports(t)
		optional := filepath.Join(env.root, "deploy", "multicluster")
		kubectl(t, "apply", "-f", optional)
		t.Cleanup(func() { kubectlRun("delete", "-f", optional, "--ignore-not-found") })
		ns := newNamespace(t, "deploy-multicluster")
		createImport(t, imports, ns, "db", mcs.Headless)
		applySlice(t, k8stest.ImportSlice(ns, "db", "east", "db-east", discovery.AddressTypeIPv4,
			k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)), k8stest.Endpoint{Addrs: []string{"10.1.202.1"}, Hostname: "db-0"}))
		c := startCoreDNSZones(t, "kubetree", []string{"clusterset.local"}, nil, "multicluster clusterset.local", "kubeconfig "+kubeconfig)
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitAnswer(t, "db-0.east.db."+ns+".svc.clusterset.local.", dns.TypeA, "10.1.202.1")
		if out := strings.ToLower(c.out.String()); strings.Contains(out, "forbidden") {
			t.Errorf("coredns met a Forbidden with the ServiceAccount's token and deploy/multicluster:\n%s", c.out.String())
		}
	})

	t.Run("shipped Corefile", func(t *testing.T) {
		// The whole ConfigMap Corefile, with its addresses moved to loopback ports and forward sent
		// to the stub server: every plugin in it loads in bin/coredns and they work together.
		c := startShippedCorefile(t, corefile, kubeconfig)
		eventually(t, "ready", 30*time.Second, c.isReady)
		c.waitAnswer(t, deployDNSName+"."+deployNS+".svc.cluster.local.", dns.TypeA, deployClusterIP)
		c.waitAnswer(t, "www.example.org.", dns.TypeA, "192.0.2.1") // forward
		ptr, _ := dns.ReverseAddr(deployClusterIP)
		c.waitAnswer(t, ptr, dns.TypePTR, deployDNSName+"."+deployNS+".svc.cluster.local.")
		// The liveness probe's path, on health's address.
		resp, err := http.Get("http://" + c.pprof + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/health: %s", resp.Status)
		}
	})
}

// checkDeployObjects: the API server holds what deploy/ says, and the objects' cross-references agree.
func checkDeployObjects(t *testing.T) {
	svc, err := env.client.CoreV1().Services(deployNS).Get(bg, deployDNSName, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != deployClusterIP {
		t.Errorf("kube-dns clusterIP %q, want %s", svc.Spec.ClusterIP, deployClusterIP)
	}
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s %d/%s", p.Name, p.Port, p.Protocol))
	}
	if got, want := strings.Join(ports, ", "), "dns 53/UDP, dns-tcp 53/TCP, metrics 9153/TCP"; got != want {
		t.Errorf("kube-dns ports %q, want %q", got, want)
	}

	d, err := env.client.AppsV1().Deployments(deployNS).Get(bg, deployName, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := labels.Set(d.Spec.Template.Labels)
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(pod) {
		t.Errorf("kube-dns selector %v does not select the pods %v", svc.Spec.Selector, pod)
	}
	pdb, err := env.client.PolicyV1().PodDisruptionBudgets(deployNS).Get(bg, deployName, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sel, err := meta.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(pod) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v (%v)", pdb.Spec.Selector, pod, err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}

	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != deployName {
		t.Errorf("serviceAccountName %q, want %s", spec.ServiceAccountName, deployName)
	}
	if _, err := env.client.CoreV1().ServiceAccounts(deployNS).Get(bg, spec.ServiceAccountName, meta.GetOptions{}); err != nil {
		t.Error(err)
	}
	crb, err := env.client.RbacV1().ClusterRoleBindings().Get(bg, deployRole, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != deployRole || len(crb.Subjects) != 1 ||
		crb.Subjects[0].Kind != "ServiceAccount" || crb.Subjects[0].Namespace != deployNS || crb.Subjects[0].Name != deployName {
		t.Errorf("ClusterRoleBinding does not bind %s to the ServiceAccount: %+v %+v", deployRole, crb.RoleRef, crb.Subjects)
	}

	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	ctr := spec.Containers[0]
	mounted := false
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == deployName {
			for _, m := range ctr.VolumeMounts {
				mounted = mounted || (m.Name == v.Name && m.MountPath == "/etc/coredns")
			}
		}
	}
	if !mounted || strings.Join(ctr.Args, " ") != "-conf /etc/coredns/Corefile" {
		t.Errorf("the ConfigMap is not the Corefile coredns reads: args %v, mounts %v", ctr.Args, ctr.VolumeMounts)
	}
	// The probes use the ports the Corefile's health and ready plugins listen on by default.
	if p := ctr.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.IntValue() != 8080 {
		t.Errorf("liveness probe %+v, want GET /health :8080", p)
	}
	if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/ready" || p.HTTPGet.Port.IntValue() != 8181 {
		t.Errorf("readiness probe %+v, want GET /ready :8181", p)
	}
}

// checkPodSecurity creates (dry run) a pod from the Deployment's template in a namespace that
// enforces the restricted Pod Security Standard: non-root, no privilege escalation, only
// NET_BIND_SERVICE, RuntimeDefault seccomp. It also resolves the priority class.
func checkPodSecurity(t *testing.T) {
	d, err := env.client.AppsV1().Deployments(deployNS).Get(bg, deployName, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, "deploy-psa")
	cur, err := env.client.CoreV1().Namespaces().Get(bg, ns, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
	if _, err := env.client.CoreV1().Namespaces().Update(bg, cur, meta.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &api.Pod{
		ObjectMeta: meta.ObjectMeta{Namespace: ns, Name: "kubetree-probe", Labels: maps.Clone(d.Spec.Template.Labels)},
		Spec:       d.Spec.Template.Spec,
	}
	got, err := env.client.CoreV1().Pods(ns).Create(bg, pod, meta.CreateOptions{DryRun: []string{meta.DryRunAll}})
	if err != nil {
		t.Fatalf("the Deployment's pod is rejected: %v", err)
	}
	if got.Spec.Priority == nil || *got.Spec.Priority < 2000000000 {
		t.Errorf("priority %v: system-cluster-critical not applied", got.Spec.Priority)
	}
	// The namespace does enforce: one capability more is refused.
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].SecurityContext.Capabilities.Add = append(bad.Spec.Containers[0].SecurityContext.Capabilities.Add, "NET_ADMIN")
	if _, err := env.client.CoreV1().Pods(ns).Create(bg, bad, meta.CreateOptions{DryRun: []string{meta.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("a pod with NET_ADMIN: want Forbidden by PodSecurity, got %v", err)
	}
}

// checkLeastPrivilege: the ServiceAccount can list and watch services, endpointslices and
// namespaces, and nothing else.
func checkLeastPrivilege(t *testing.T, sa kubernetes.Interface) {
	ctx := bg
	one := meta.ListOptions{Limit: 1}
	allowed := map[string]error{}
	_, allowed["list services"] = sa.CoreV1().Services("").List(ctx, one)
	_, allowed["list endpointslices"] = sa.DiscoveryV1().EndpointSlices("").List(ctx, one)
	_, allowed["list namespaces"] = sa.CoreV1().Namespaces().List(ctx, one)
	for _, w := range []struct {
		what string
		fn   func() (watch.Interface, error)
	}{
		{"watch services", func() (watch.Interface, error) { return sa.CoreV1().Services("").Watch(ctx, one) }},
		{"watch endpointslices", func() (watch.Interface, error) { return sa.DiscoveryV1().EndpointSlices("").Watch(ctx, one) }},
		{"watch namespaces", func() (watch.Interface, error) { return sa.CoreV1().Namespaces().Watch(ctx, one) }},
	} {
		stream, err := w.fn()
		if err == nil {
			stream.Stop()
		}
		allowed[w.what] = err
	}
	for what, err := range allowed {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	svc := k8stest.ClusterIPService("default", "not-allowed", nil, k8stest.TCP("http", 80))
	forbidden := map[string]error{}
	_, forbidden["list pods"] = sa.CoreV1().Pods("").List(ctx, one)
	_, forbidden["list pods in kube-system"] = sa.CoreV1().Pods(deployNS).List(ctx, one)
	_, forbidden["list secrets"] = sa.CoreV1().Secrets("").List(ctx, one)
	_, forbidden["list secrets in kube-system"] = sa.CoreV1().Secrets(deployNS).List(ctx, one)
	_, forbidden["list configmaps"] = sa.CoreV1().ConfigMaps("").List(ctx, one)
	_, forbidden["list endpoints"] = sa.CoreV1().Endpoints("").List(ctx, one)
	_, forbidden["list nodes"] = sa.CoreV1().Nodes().List(ctx, one)
	_, forbidden["get a service"] = sa.CoreV1().Services(deployNS).Get(ctx, deployDNSName, meta.GetOptions{})
	_, forbidden["create a service"] = sa.CoreV1().Services("default").Create(ctx, svc, meta.CreateOptions{})
	forbidden["delete a service"] = sa.CoreV1().Services(deployNS).Delete(ctx, deployDNSName, meta.DeleteOptions{DryRun: []string{meta.DryRunAll}})
	forbidden["delete a namespace"] = sa.CoreV1().Namespaces().Delete(ctx, "default", meta.DeleteOptions{DryRun: []string{meta.DryRunAll}})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want Forbidden, got %v", what, err)
		}
	}
}

// kubectl runs bin/kubectl as the admin user and fails the test if it fails.
func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := kubectlRun(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func kubectlRun(args ...string) (string, error) {
	cmd := exec.Command(env.root+"/bin/kubectl", append([]string{"--kubeconfig", env.vars["KUBECONFIG"]}, args...)...)
	cmd.Env = os.Environ()
	if dir := env.vars["KUBECACHEDIR"]; dir != "" {
		cmd.Env = append(cmd.Env, "KUBECACHEDIR="+dir)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// serviceAccountKubeconfig mints a token for the ServiceAccount and writes a kubeconfig that uses
// it: what a pod of the Deployment would authenticate as.
func serviceAccountKubeconfig(t testing.TB, ns, name string) string {
	t.Helper()
	token := strings.TrimSpace(kubectl(t, "create", "token", name, "-n", ns, "--duration=1h"))
	if token == "" {
		t.Fatal("kubectl create token printed no token")
	}
	ca, err := os.ReadFile(env.vars["APISERVER_CA_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: env.vars["APISERVER_URL"], CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), "kubeconfig-"+name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func clientFor(t testing.TB, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 10 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// corefileKubetreeOptions returns the option lines of the kubetree block of a Corefile.
func corefileKubetreeOptions(t testing.TB, corefile string) []string {
	t.Helper()
	var options []string
	in := false
	for line := range strings.Lines(corefile) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "kubetree ") && strings.HasSuffix(line, "{"):
			if got := strings.Fields(strings.TrimSuffix(line, "{")); strings.Join(got, " ") != "kubetree cluster.local in-addr.arpa ip6.arpa" {
				t.Fatalf("the shipped kubetree stanza serves %v; startCoreDNS serves cluster.local in-addr.arpa ip6.arpa", got[1:])
			}
			in = true
		case in && line == "}":
			return options
		case in && line != "" && !strings.HasPrefix(line, "#"):
			options = append(options, line)
		}
	}
	t.Fatalf("no kubetree block in the Corefile:\n%s", corefile)
	return nil
}

// startShippedCorefile runs bin/coredns with the ConfigMap's Corefile, rewritten only where it must
// be to run here: listen on loopback ports (DNS on c.addr, health on c.pprof, ready on c.ready,
// prometheus on c.metrics), forward to the stub server, and the given kubeconfig.
func startShippedCorefile(t testing.TB, corefile, kubeconfig string) *coreDNS {
	t.Helper()
	return startShippedCorefileWith(t, env.root+"/bin/coredns", corefile, kubeconfig)
}

// startShippedCorefileWith runs binary (bin/coredns, or the one from the image) with the shipped
// Corefile moved to loopback ports.
func startShippedCorefileWith(t testing.TB, binary, corefile, kubeconfig string) *coreDNS {
	t.Helper()
	ports := freePorts(t, 4)
	c := &coreDNS{
		addr: ports[0], ready: ports[1], pprof: ports[2], metrics: ports[3],
		corefile: filepath.Join(t.TempDir(), "Corefile"), out: &syncBuffer{}, done: make(chan struct{}),
	}
	rewrites := []struct {
		match func(string) bool
		to    string
		done  bool
	}{
		{match: func(l string) bool { return l == ".:53 {" }, to: ".:" + port(c.addr) + " {\n    bind 127.0.0.1"},
		{match: func(l string) bool { return l == "health {" }, to: "health " + c.pprof + " {"},
		{match: func(l string) bool { return l == "ready" }, to: "ready " + c.ready},
		{match: func(l string) bool { return l == "prometheus :9153" }, to: "prometheus " + c.metrics},
		{match: func(l string) bool { return l == "forward . /etc/resolv.conf {" }, to: "forward . " + env.stubDNS + " {"},
		{match: func(l string) bool { return strings.HasPrefix(l, "kubetree ") && strings.HasSuffix(l, "{") },
			to: "%s\n        kubeconfig " + kubeconfig},
	}
	var out strings.Builder
	for line := range strings.Lines(corefile) {
		trimmed := strings.TrimSpace(line)
		for i := range rewrites {
			r := &rewrites[i]
			if !r.done && r.match(trimmed) {
				r.done = true
				to := r.to
				if strings.Contains(to, "%s") {
					to = fmt.Sprintf(to, trimmed)
				}
				line = to + "\n"
				break
			}
		}
		out.WriteString(line)
	}
	var missing []error
	for i, r := range rewrites {
		if !r.done {
			missing = append(missing, fmt.Errorf("rewrite %d (%q) found nothing to rewrite", i, r.to))
		}
	}
	if err := errors.Join(missing...); err != nil {
		t.Fatalf("the shipped Corefile changed shape; update the test:\n%v\n%s", err, corefile)
	}
	c.run(t, binary, out.String())
	return c
}

// run writes corefile to c.corefile and runs binary with it (and environ, NAME=value, beside this
// process's environment) until the test ends, waiting until it answers dns-version over TCP.
func (c *coreDNS) run(t testing.TB, binary, corefile string, environ ...string) {
	t.Helper()
	if err := os.WriteFile(c.corefile, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(binary, "-conf", c.corefile)
	c.cmd.Env = append(os.Environ(), environ...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("Corefile:\n%s\ncoredns output:\n%s", corefile, c.out.String())
		}
	})
	eventually(t, "coredns listening", 30*time.Second, func() bool {
		select {
		case <-c.done:
			t.Fatalf("coredns exited:\n%s\nCorefile:\n%s", c.out.String(), corefile)
		default:
		}
		_, err := c.try("tcp", "dns-version.cluster.local.", dns.TypeTXT)
		return err == nil
	})
}
