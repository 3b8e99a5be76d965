package ops

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// linearParams are the cluster-proportional-autoscaler's "linear" parameters, as in its ConfigMap.
type linearParams struct {
	CoresPerReplica           float64 `json:"coresPerReplica"`
	NodesPerReplica           float64 `json:"nodesPerReplica"`
	PreventSinglePointFailure bool    `json:"preventSinglePointFailure"`
	IncludeUnschedulableNodes bool    `json:"includeUnschedulableNodes"`
	Min                       int     `json:"min"`
	Max                       int     `json:"max"`
}

// standardLinear is the cluster add-on's dns-horizontal-autoscaler: a replica per 256 cores or 16
// nodes, whichever asks more, never one alone, cordoned nodes counted.
var standardLinear = linearParams{CoresPerReplica: 256, NodesPerReplica: 16, PreventSinglePointFailure: true, IncludeUnschedulableNodes: true}

// autoscalerGrants are what the autoscaler needs: read the nodes, read and set the target's scale,
// seed its ConfigMap.
var autoscalerGrants = []string{
	"/configmaps create", "/configmaps get", "/nodes list", "/nodes watch",
	"/replicationcontrollers/scale get", "/replicationcontrollers/scale update",
	"apps/deployments/scale get", "apps/deployments/scale update",
	"apps/replicasets/scale get", "apps/replicasets/scale update",
}

// replicas is the linear mode's count for a cluster (its formula, min and max left out: unset).
func (p linearParams) replicas(nodes, cores int) int {
	n := max(math.Ceil(float64(cores)/p.CoresPerReplica), math.Ceil(float64(nodes)/p.NodesPerReplica))
	if p.PreventSinglePointFailure && nodes > 1 {
		n = max(n, 2)
	}
	return int(n)
}

func parseLinear(t *testing.T, text string) linearParams {
	t.Helper()
	var p linearParams
	if err := json.Unmarshal([]byte(text), &p); err != nil {
		t.Fatalf("linear parameters %q: %v", text, err)
	}
	return p
}

// commandFlag is the value of --name=value among a container's command.
func commandFlag(t *testing.T, command []string, name string) string {
	t.Helper()
	for _, a := range command {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("no --%s in %q", name, command)
	return ""
}

// autoscalerContainer is the autoscaler Deployment's one container.
func autoscalerContainer(t *testing.T, d object) (name string, command []string, sa string) {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers, want 1", d.Metadata.Name, len(cs))
	}
	c := cs[0]
	if c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot ||
		c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("%s: the autoscaler is not non-root with a read-only root: %+v", d.Metadata.Name, c.SecurityContext)
	}
	if !strings.HasPrefix(c.Image, "registry.k8s.io/cpa/cluster-proportional-autoscaler:") {
		t.Errorf("%s: image %q, want the cluster-proportional-autoscaler", d.Metadata.Name, c.Image)
	}
	return c.Name, c.Command, d.Spec.Template.Spec.ServiceAccountName
}

// checkAutoscalerRBAC: the ServiceAccount the autoscaler runs as is bound to a ClusterRole that
// grants exactly autoscalerGrants.
func checkAutoscalerRBAC(t *testing.T, rbac []object, serviceAccount string) {
	t.Helper()
	sa := only(t, rbac, "ServiceAccount")
	if sa.Metadata.Name != serviceAccount || sa.Metadata.Namespace != "kube-system" {
		t.Errorf("the autoscaler runs as %q, the ServiceAccount is %s/%s", serviceAccount, sa.Metadata.Namespace, sa.Metadata.Name)
	}
	role, binding := only(t, rbac, "ClusterRole"), only(t, rbac, "ClusterRoleBinding")
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Metadata.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != sa.Metadata.Name ||
		binding.Subjects[0].Namespace != sa.Metadata.Namespace {
		t.Errorf("the binding %+v %+v does not bind %s to %s", binding.RoleRef, binding.Subjects, role.Metadata.Name, sa.Metadata.Name)
	}
	if g := grants(role.Rules); !slices.Equal(g, autoscalerGrants) {
		t.Errorf("the autoscaler's ClusterRole grants %v, want %v", g, autoscalerGrants)
	}
}

// TestAutoscalerScalesKubetree: deploy/autoscaler/ is the cluster add-on's DNS autoscaler in
// linear mode with its standard parameters, in its ConfigMap and in the defaults it seeds a
// missing one with, and it scales deploy/deployment.yaml's Deployment in its namespace, as a
// ServiceAccount with only the autoscaler's grants.
func TestAutoscalerScalesKubetree(t *testing.T) {
	objs := readObjects(t, filepath.Join(root, "deploy/autoscaler/autoscaler.yaml"))
	kubetree := only(t, readObjects(t, filepath.Join(root, "deploy/deployment.yaml")), "Deployment")
	cm := only(t, objs, "ConfigMap")
	_, command, sa := autoscalerContainer(t, only(t, objs, "Deployment"))

	if got := parseLinear(t, cm.Data["linear"]); got != standardLinear {
		t.Errorf("ConfigMap %s: linear %+v, want %+v", cm.Metadata.Name, got, standardLinear)
	}
	var defaults struct{ Linear linearParams }
	if err := json.Unmarshal([]byte(commandFlag(t, command, "default-params")), &defaults); err != nil {
		t.Fatalf("--default-params: %v", err)
	}
	if defaults.Linear != standardLinear {
		t.Errorf("--default-params linear %+v, want the ConfigMap's %+v", defaults.Linear, standardLinear)
	}
	if got := commandFlag(t, command, "configmap"); got != cm.Metadata.Name || cm.Metadata.Namespace != kubetree.Metadata.Namespace {
		t.Errorf("--configmap=%s, the ConfigMap is %s/%s", got, cm.Metadata.Namespace, cm.Metadata.Name)
	}
	if got, want := commandFlag(t, command, "target"), "Deployment/"+kubetree.Metadata.Name; got != want {
		t.Errorf("--target=%s, want %s", got, want)
	}
	if got := commandFlag(t, command, "namespace"); got != kubetree.Metadata.Namespace {
		t.Errorf("--namespace=%s, want %s", got, kubetree.Metadata.Namespace)
	}
	checkAutoscalerRBAC(t, objs, sa)
}

// TestHelmAutoscalerScalesKubetree: the chart rendered with deploy/helm/values.yaml runs the same
// autoscaler: the standard linear parameters (the chart adds min and max, unset), aimed at the
// chart's kubetree Deployment, which then leaves its replicas to it; it runs as the ServiceAccount
// of deploy/helm/autoscaler-rbac.yaml, which grants what deploy/autoscaler/'s does.
func TestHelmAutoscalerScalesKubetree(t *testing.T) {
	objs := render(t, helmValues)
	const autoscaler = chartRelease + "-autoscaler"
	if got := parseLinear(t, named(t, objs, "ConfigMap", autoscaler).Data["linear"]); got != standardLinear {
		t.Errorf("the chart's autoscaler ConfigMap: linear %+v, want %+v", got, standardLinear)
	}
	_, command, sa := autoscalerContainer(t, named(t, objs, "Deployment", autoscaler))
	if got, want := commandFlag(t, command, "target"), "Deployment/"+chartRelease; got != want {
		t.Errorf("--target=%s, want %s", got, want)
	}
	if got := commandFlag(t, command, "configmap"); got != autoscaler {
		t.Errorf("--configmap=%s, want %s", got, autoscaler)
	}
	if r := named(t, objs, "Deployment", chartRelease).Spec.Replicas; r != nil {
		t.Errorf("the kubetree Deployment sets replicas: %d; the autoscaler owns them", *r)
	}
	checkAutoscalerRBAC(t, readObjects(t, filepath.Join(root, "deploy/helm/autoscaler-rbac.yaml")), sa)
}

// TestLinearReplicas: the formula docs/scaling-out.md uses, against the add-on's own
// examples of linear mode: the larger of the two quotients, rounded up, at least 2 on two nodes.
func TestLinearReplicas(t *testing.T) {
	for _, c := range []struct{ nodes, cores, want int }{
		{1, 4, 1},          // one node: a single replica is no worse
		{2, 8, 2},          // preventSinglePointFailure
		{17, 68, 2},        // ceil(17/16)
		{500, 8000, 32},    // nodes dominate (16-core nodes)
		{500, 64000, 250},  // cores dominate (128-core nodes)
		{5000, 80000, 313}, // the 5,000-node cluster
		{15000, 240000, 938},
	} {
		if got := standardLinear.replicas(c.nodes, c.cores); got != c.want {
			t.Errorf("%d nodes, %d cores: %d replicas, want %d", c.nodes, c.cores, got, c.want)
		}
	}
}

// TestScalingOutReplicasFollowTheAutoscaler: docs/scaling-out.md's table gives, for each
// cluster size, the replicas deploy/autoscaler/'s parameters make of it (nodes of 16 cores, so
// the nodes decide).
func TestScalingOutReplicasFollowTheAutoscaler(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docs/scaling-out.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(raw), "\n## ")
	cm := only(t, readObjects(t, filepath.Join(root, "deploy/autoscaler/autoscaler.yaml")), "ConfigMap")
	params := parseLinear(t, cm.Data["linear"])
	// A cluster size is written 500 or 5k (the figure check reads 5,000 as a measured count).
	rows := regexp.MustCompile(`(?m)^\| ([0-9,]+k?) nodes \| ([0-9,]+) \|`).FindAllStringSubmatch(section, -1)
	if len(rows) < 3 {
		t.Fatalf("%d rows of nodes and replicas in docs/scaling-out.md's table, want 500, 5k and 15k", len(rows))
	}
	for _, r := range rows {
		nodes, _ := strconv.Atoi(strings.TrimSuffix(strings.ReplaceAll(r[1], ",", ""), "k"))
		if strings.HasSuffix(r[1], "k") {
			nodes *= 1000
		}
		replicas, _ := strconv.Atoi(strings.ReplaceAll(r[2], ",", ""))
		if want := params.replicas(nodes, 16*nodes); replicas != want {
			t.Errorf("%d nodes: docs/scaling-out.md says %d replicas, the autoscaler makes %d", nodes, replicas, want)
		}
	}
}
