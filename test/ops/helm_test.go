package ops

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartDir is the unmodified official CoreDNS chart, beside the clone (CI lays shared/ there).
var chartDir = filepath.Join(root, "../shared/third_party/coredns-helm-chart")

var helmValues = filepath.Join(root, "deploy/helm/values.yaml")

// object is what the tests read of a Kubernetes object.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Data  map[string]string `json:"data"`
	Rules []rule            `json:"rules"`
	Spec  struct {
		Replicas  *int           `json:"replicas"`
		ClusterIP string         `json:"clusterIP"`
		Selector  map[string]any `json:"selector"` // a Service's labels, a workload's matchLabels
		Ports     []struct {
			Port     int    `json:"port"`
			Protocol string `json:"protocol"`
		} `json:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec podSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	RoleRef  struct{ Kind, Name string } `json:"roleRef"`
	Subjects []struct {
		Kind, Name, Namespace string
	} `json:"subjects"`
}

type rule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

type podSpec struct {
	ServiceAccountName string `json:"serviceAccountName"`
	DNSPolicy          string `json:"dnsPolicy"`
	Containers         []struct {
		Name    string   `json:"name"`
		Image   string   `json:"image"`
		Command []string `json:"command"`
		Env     []struct {
			Name, Value string
		} `json:"env"`
		Resources struct {
			Limits map[string]string `json:"limits"`
		} `json:"resources"`
		SecurityContext struct {
			RunAsNonRoot           *bool `json:"runAsNonRoot"`
			ReadOnlyRootFilesystem *bool `json:"readOnlyRootFilesystem"`
		} `json:"securityContext"`
	} `json:"containers"`
}

// helm returns the helm binary: $KUBETREE_HELM (make ops-tools sets it) or bin/helm. Without
// either the test is skipped: `make ops-tools` builds it and runs it (TestOpsToolsRunIsCurrent).
func helm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("KUBETREE_HELM"); h != "" {
		return h
	}
	h, err := filepath.Abs(filepath.Join(root, "bin/helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h); err != nil {
		t.Skip("no bin/helm: run `make ops-tools`, which builds it (hack/ops-tools)")
	}
	return h
}

// chart returns the chart's directory, or skips when shared/ is not beside the repository.
func chart(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(chartDir, "Chart.yaml")); err != nil {
		t.Skipf("the CoreDNS chart is not at %s (shared/third_party/coredns-helm-chart beside the repository): %v", chartDir, err)
	}
	return chartDir
}

// render runs helm template on the chart with the given values files and returns its objects.
func render(t *testing.T, values ...string) []object {
	t.Helper()
	args := []string{"template", "kubetree", chart(t), "--namespace", "kube-system"}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	cmd := exec.Command(helm(t), args...)
	// helm must not read or write the user's helm configuration.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return parseObjects(t, out)
}

func parseObjects(t *testing.T, data []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
	return objs
}

func readObjects(t *testing.T, path string) []object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseObjects(t, data)
}

// chartRelease is what the chart names the objects of the release "kubetree" that deploy/README.md
// installs: the kubetree Deployment and its Corefile's ConfigMap.
const chartRelease = "kubetree-coredns"

// named is the one object of that kind and name.
func named(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects %s %s, want 1", len(found), kind, name)
	}
	return found[0]
}

func only(t *testing.T, objs []object, kind string) object {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// directives are a Corefile's plugin lines inside its server blocks, first word of each line.
func directives(corefile string) []string {
	var ds []string
	for _, line := range strings.Split(corefile, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			ds = append(ds, f[0])
		}
	}
	return ds
}

// TestHelmValuesRenderKubetree renders the official CoreDNS chart with deploy/helm/values.yaml
// and checks the result against deploy/: the Corefile is deploy/configmap.yaml's (a kubetree
// stanza, no kubernetes), the chart makes no RBAC of its own and the pods run as the
// ServiceAccount of deploy/rbac.yaml, whose ClusterRole is list/watch on services, endpointslices
// and namespaces only (and deploy/pods-verified/ adds pods to the same ServiceAccount); the image,
// memory limit, GOMEMLIMIT and Service address are deploy/'s.
func TestHelmValuesRenderKubetree(t *testing.T) {
	objs := render(t, helmValues)
	deploy := append(readObjects(t, filepath.Join(root, "deploy/configmap.yaml")),
		readObjects(t, filepath.Join(root, "deploy/deployment.yaml"))...)
	deploy = append(deploy, readObjects(t, filepath.Join(root, "deploy/service.yaml"))...)
	rbac := readObjects(t, filepath.Join(root, "deploy/rbac.yaml"))

	t.Run("Corefile", func(t *testing.T) {
		got := named(t, objs, "ConfigMap", chartRelease).Data["Corefile"]
		want := only(t, deploy, "ConfigMap").Data["Corefile"]
		if !slices.Equal(strings.Fields(got), strings.Fields(want)) {
			t.Errorf("the chart's Corefile differs from deploy/configmap.yaml's:\n%s\nwant\n%s", got, want)
		}
		ds := directives(got)
		if !slices.Contains(ds, "kubetree") || slices.Contains(ds, "kubernetes") {
			t.Errorf("Corefile directives %v: want kubetree and no kubernetes", ds)
		}
		if !regexp.MustCompile(`(?m)^\s*kubetree cluster\.local in-addr\.arpa ip6\.arpa \{$`).MatchString(got) {
			t.Errorf("no kubetree stanza for cluster.local and the reverse zones in\n%s", got)
		}
	})

	t.Run("RBAC", func(t *testing.T) {
		for _, o := range objs {
			switch o.Kind {
			case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount":
				t.Errorf("the chart renders %s %s: RBAC comes from deploy/rbac.yaml", o.Kind, o.Metadata.Name)
			}
		}
		sa := only(t, rbac, "ServiceAccount")
		pod := named(t, objs, "Deployment", chartRelease).Spec.Template.Spec
		if pod.ServiceAccountName != sa.Metadata.Name || sa.Metadata.Namespace != "kube-system" {
			t.Errorf("pods run as %q, deploy/rbac.yaml's ServiceAccount is %s/%s",
				pod.ServiceAccountName, sa.Metadata.Namespace, sa.Metadata.Name)
		}
		role := only(t, rbac, "ClusterRole")
		binding := only(t, rbac, "ClusterRoleBinding")
		if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Metadata.Name ||
			len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
			binding.Subjects[0].Name != sa.Metadata.Name || binding.Subjects[0].Namespace != sa.Metadata.Namespace {
			t.Errorf("deploy/rbac.yaml's binding %+v %+v does not bind %s to %s", binding.RoleRef, binding.Subjects,
				role.Metadata.Name, sa.Metadata.Name)
		}
		if got, want := grants(role.Rules), []string{
			"/namespaces list", "/namespaces watch", "/services list", "/services watch",
			"discovery.k8s.io/endpointslices list", "discovery.k8s.io/endpointslices watch",
		}; !slices.Equal(got, want) {
			t.Errorf("ClusterRole grants %v, want %v", got, want)
		}
		// pods verified adds deploy/pods-verified/: pods, to the same ServiceAccount.
		pods := readObjects(t, filepath.Join(root, "deploy/pods-verified/rbac.yaml"))
		podsRole, podsBinding := only(t, pods, "ClusterRole"), only(t, pods, "ClusterRoleBinding")
		if g := grants(podsRole.Rules); !slices.Equal(g, []string{"/pods list", "/pods watch"}) {
			t.Errorf("deploy/pods-verified grants %v, want list and watch on pods", g)
		}
		if podsBinding.RoleRef.Name != podsRole.Metadata.Name || len(podsBinding.Subjects) != 1 ||
			podsBinding.Subjects[0].Name != pod.ServiceAccountName || podsBinding.Subjects[0].Namespace != "kube-system" {
			t.Errorf("deploy/pods-verified binds %+v to %+v, not to the pods' ServiceAccount %s",
				podsBinding.RoleRef, podsBinding.Subjects, pod.ServiceAccountName)
		}
	})

	t.Run("Deployment", func(t *testing.T) {
		got := named(t, objs, "Deployment", chartRelease).Spec.Template
		want := only(t, deploy, "Deployment").Spec.Template
		if len(got.Spec.Containers) != 1 {
			t.Fatalf("%d containers, want 1", len(got.Spec.Containers))
		}
		c, w := got.Spec.Containers[0], want.Spec.Containers[0]
		if c.Image != w.Image || !strings.HasPrefix(c.Image, "kubetree/coredns:") {
			t.Errorf("image %q, want deploy/deployment.yaml's %q", c.Image, w.Image)
		}
		if c.Name != w.Name {
			t.Errorf("container %q, want %q (the memory alert matches container=%q)", c.Name, w.Name, w.Name)
		}
		if !reflect.DeepEqual(c.Env, w.Env) {
			t.Errorf("env %v, want %v", c.Env, w.Env)
		}
		if c.Resources.Limits["memory"] != w.Resources.Limits["memory"] {
			t.Errorf("memory limit %q, want %q", c.Resources.Limits["memory"], w.Resources.Limits["memory"])
		}
		if c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot ||
			c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("the container is not non-root with a read-only root: %+v", c.SecurityContext)
		}
		if got.Spec.DNSPolicy != "Default" {
			t.Errorf("dnsPolicy %q, want Default (forward reads the node's resolv.conf)", got.Spec.DNSPolicy)
		}
		if got.Metadata.Labels["k8s-app"] != "kube-dns" {
			t.Errorf("pod labels %v: want k8s-app=kube-dns", got.Metadata.Labels)
		}
	})

	t.Run("Service", func(t *testing.T) {
		got, want := only(t, objs, "Service"), only(t, deploy, "Service")
		if got.Metadata.Name != "kube-dns" || got.Spec.ClusterIP != want.Spec.ClusterIP {
			t.Errorf("Service %s %s, want kube-dns %s", got.Metadata.Name, got.Spec.ClusterIP, want.Spec.ClusterIP)
		}
		var ports []string
		for _, p := range got.Spec.Ports {
			ports = append(ports, p.Protocol+" "+strconv.Itoa(p.Port))
		}
		sort.Strings(ports)
		if !slices.Equal(ports, []string{"TCP 53", "UDP 53"}) {
			t.Errorf("Service ports %v, want TCP 53 and UDP 53", ports)
		}
	})
}

// TestHelmChartDefaultsAreWhatValuesReplace: the chart's own defaults run the in-tree plugin
// with a ClusterRole that also reads pods and endpoints; that is what values.yaml turns off, and
// the checks above would see it.
func TestHelmChartDefaultsAreWhatValuesReplace(t *testing.T) {
	objs := render(t)
	if ds := directives(only(t, objs, "ConfigMap").Data["Corefile"]); !slices.Contains(ds, "kubernetes") || slices.Contains(ds, "kubetree") {
		t.Errorf("the chart's default Corefile has directives %v; expected the in-tree kubernetes plugin", ds)
	}
	if g := grants(only(t, objs, "ClusterRole").Rules); !slices.Contains(g, "/pods list") {
		t.Errorf("the chart's default ClusterRole grants %v; expected pods among them", g)
	}
}

// grants flattens RBAC rules into sorted "group/resource verb" strings.
func grants(rules []rule) []string {
	var g []string
	for _, r := range rules {
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					g = append(g, group+"/"+res+" "+v)
				}
			}
		}
	}
	sort.Strings(g)
	return g
}
