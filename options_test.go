package kubetree

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/kubernetes"

	"github.com/kubetree/kubetree/internal/apiclient"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The in-tree kubernetes plugin's options, walked case by case: every `case` of its v1.15.0 parser
// (read from its source, so that a new one fails this test) is given stanzas that it accepts and
// stanzas it refuses, and kubetree must accept and refuse the same ones, with the same meaning.
// Where it does not, the option table of docs/differences.md says so, in the words of the case's why.

// optionCase is one stanza body, parsed by both plugins.
type optionCase struct {
	option string // the in-tree parser's case it exercises
	body   string // the stanza's block
	zones  string // the stanza's zones, "cluster.local" unless set
	// why is empty when both plugins must agree; otherwise the difference, in the words of the
	// docs/differences.md's option table.
	why string
}

func TestEveryInTreeOptionParsesTheSame(t *testing.T) {
	kubeconfig := twoContextKubeconfig(t)
	cases := []optionCase{
		{option: "endpoint", body: "endpoint https://10.0.0.1:6443"},
		{option: "endpoint", body: "endpoint https://10.0.0.1:6443 https://10.0.0.2:6443"},
		{option: "endpoint", body: "endpoint"},
		{option: "tls", body: "endpoint https://10.0.0.1:6443\ntls cert.pem key.pem ca.pem"},
		{option: "tls", body: "tls cert.pem key.pem"},
		{option: "kubeconfig", body: "kubeconfig " + kubeconfig},
		{option: "kubeconfig", body: "kubeconfig " + kubeconfig + " other"},
		{option: "kubeconfig", body: "kubeconfig"},
		{option: "kubeconfig", body: "kubeconfig " + kubeconfig + " other third"},
		{option: "namespaces", body: "namespaces prod staging"},
		{option: "namespaces", body: "namespaces"},
		{option: "namespaces", body: "namespaces prod\nnamespace_labels team=a"},
		{option: "labels", body: "labels environment in (staging, qa),application=nginx"},
		{option: "labels", body: "labels ==="},
		{option: "labels", body: "labels"},
		{option: "namespace_labels", body: "namespace_labels istio-injection=enabled"},
		{option: "namespace_labels", body: "namespace_labels ==="},
		{option: "namespace_labels", body: "namespace_labels"},
		{option: "pods", body: "pods disabled"},
		{option: "pods", body: "pods insecure"},
		{option: "pods", body: "pods verified"},
		{option: "pods", body: "pods sometimes"},
		{option: "pods", body: "pods"},
		{option: "pods", body: "pods insecure verified"},
		{option: "endpoint_pod_names", body: "endpoint_pod_names"},
		{option: "endpoint_pod_names", body: "endpoint_pod_names yes"},
		{option: "noendpoints", body: "noendpoints"},
		{option: "noendpoints", body: "noendpoints yes"},
		{option: "ttl", body: "ttl 30"},
		{option: "ttl", body: "ttl 0"},
		{option: "ttl", body: "ttl 3600"},
		{option: "ttl", body: "ttl 3601"},
		{option: "ttl", body: "ttl -1"},
		{option: "ttl", body: "ttl soon"},
		{option: "ttl", body: "ttl"},
		{option: "ttl", body: "ttl 30 60", why: "`ttl 30 60` is refused"},
		{option: "fallthrough", body: "fallthrough"},
		{option: "fallthrough", body: "fallthrough in-addr.arpa ip6.arpa"},
		{option: "ignore", body: "ignore empty_service"},
		{option: "ignore", body: "ignore everything"},
		{option: "ignore", body: "ignore", why: "`ignore` alone is refused"},
		{option: "startup_timeout", body: "startup_timeout 10s"},
		{option: "startup_timeout", body: "startup_timeout 0s"},
		{option: "startup_timeout", body: "startup_timeout soon"},
		{option: "startup_timeout", body: "startup_timeout"},
		{option: "startup_timeout", body: "startup_timeout -1s", why: "a negative duration is refused"},
		{option: "apiserver_qps", body: "apiserver_qps 50"},
		{option: "apiserver_qps", body: "apiserver_qps 2.5"},
		{option: "apiserver_qps", body: "apiserver_qps -1"},
		{option: "apiserver_qps", body: "apiserver_qps many"},
		{option: "apiserver_qps", body: "apiserver_qps"},
		{option: "apiserver_burst", body: "apiserver_burst 100"},
		{option: "apiserver_burst", body: "apiserver_burst -1"},
		{option: "apiserver_burst", body: "apiserver_burst many"},
		{option: "apiserver_burst", body: "apiserver_burst 1 2"},
		{option: "apiserver_max_inflight", body: "apiserver_max_inflight 10"},
		{option: "apiserver_max_inflight", body: "apiserver_max_inflight 0"},
		{option: "apiserver_max_inflight", body: "apiserver_max_inflight -1"},
		{option: "apiserver_max_inflight", body: "apiserver_max_inflight many"},
		{option: "zonal", body: "zonal"},
		{option: "zonal", body: "zonal\nnoendpoints"},
		{option: "zonal", body: "zonal prefer"},
		{option: "multicluster", body: "multicluster clusterset.local", zones: "cluster.local clusterset.local"},
		{option: "multicluster", body: "multicluster", zones: "cluster.local clusterset.local"},
		{option: "multicluster", body: "multicluster clusterset.local"},
		{option: "unknown", body: "nameservers 10.0.0.1"},
	}

	covered := map[string]bool{}
	table := optionTable(t, "## Options of the in-tree plugin")
	for _, tc := range cases {
		covered[tc.option] = true
		t.Run(tc.option+": "+tc.body, func(t *testing.T) {
			zones := tc.zones
			if zones == "" {
				zones = "cluster.local"
			}
			stanza := " " + zones + " {\n" + tc.body + "\n}"
			k8s, inTreeErr := parseInTree("kubernetes" + stanza)
			kt, ourErr := parse(caddy.NewTestController("dns", "kubetree"+stanza))
			inTree, ours := "refused", "refused"
			if inTreeErr == nil {
				inTree = inTreeMeaning(t, k8s)
			}
			if ourErr == nil {
				ours = ourMeaning(t, kt)
			}
			switch {
			case tc.why == "" && inTree != ours:
				t.Errorf("kubetree and kubernetes disagree:\n  kubernetes: %s (%v)\n  kubetree:   %s (%v)", inTree, inTreeErr, ours, ourErr)
			case tc.why != "" && inTree == ours:
				t.Errorf("documented as a difference (%s), but both say %s: take it out of docs/differences.md", tc.why, ours)
			case tc.why != "" && !strings.Contains(table[tc.option], tc.why):
				t.Errorf("a difference the option table of docs/differences.md does not state: %q in the row of %s (kubernetes: %s; kubetree: %s)", tc.why, tc.option, inTree, ours)
			}
		})
	}
	for _, option := range inTreeOptionNames(t) {
		if !covered[option] {
			t.Errorf("the in-tree parser's case %q is not walked here", option)
		}
		if _, ok := table[option]; !ok {
			t.Errorf("the option table of docs/differences.md has no row for %q", option)
		}
	}
}

// parseInTree parses a stanza with the in-tree plugin's own parser.
func parseInTree(input string) (*kubernetes.Kubernetes, error) {
	c := caddy.NewTestController("dns", input)
	c.Next()
	return kubernetes.ParseStanza(c)
}

// meaning is what a stanza asks for, in terms both plugins share, so that the two can be compared.
type meaning struct {
	endpoint, kubeconfigHost, labels, namespaceLabels, pods string
	tls, namespaces, fall, multicluster                     []string
	endpointPodNames, noEndpoints, ignoreEmpty, zonal       bool
	ttl                                                     uint32
	startupTimeout                                          time.Duration
	qps                                                     float32
	burst, maxInflight                                      int
}

func (m meaning) String() string {
	slices.Sort(m.namespaces)
	type plain meaning // without this method
	return fmt.Sprintf("%+v", plain(m))
}

func inTreeMeaning(t *testing.T, k *kubernetes.Kubernetes) string {
	t.Helper()
	v := reflect.ValueOf(k).Elem()
	opts := unexported(v, "opts")
	m := meaning{
		endpoint:         first(k.APIServerList),
		tls:              []string{k.APIClientCert, k.APIClientKey, k.APICertAuth},
		namespaces:       slices.Collect(maps.Keys(k.Namespaces)),
		fall:             k.Fall.Zones,
		labels:           selector(unexported(opts, "labelSelector").Interface().(*meta.LabelSelector)),
		namespaceLabels:  selector(unexported(opts, "namespaceLabelSelector").Interface().(*meta.LabelSelector)),
		pods:             unexported(v, "podMode").String(),
		endpointPodNames: unexported(v, "endpointNameMode").Bool(),
		noEndpoints:      !unexported(opts, "initEndpointsCache").Bool(),
		ignoreEmpty:      unexported(opts, "ignoreEmptyService").Bool(),
		zonal:            unexported(opts, "zonal").Bool(),
		multicluster:     unexported(opts, "multiclusterZones").Interface().([]string),
		ttl:              uint32(unexported(v, "ttl").Uint()),
		startupTimeout:   time.Duration(unexported(v, "startupTimeout").Int()),
		qps:              float32(unexported(v, "apiQPS").Float()),
		burst:            int(unexported(v, "apiBurst").Int()),
		maxInflight:      int(unexported(v, "apiMaxInflight").Int()),
	}
	if k.ClientConfig != nil {
		rc, err := k.ClientConfig.ClientConfig()
		m.kubeconfigHost = hostOf(rc, err)
	}
	return m.String()
}

func ourMeaning(t *testing.T, k *Kubetree) string {
	t.Helper()
	c := k.cfg
	m := meaning{
		endpoint:         c.endpoint,
		tls:              []string{c.tlsCert, c.tlsKey, c.tlsCA},
		namespaces:       slices.Collect(maps.Keys(c.namespaces)),
		fall:             k.Fall.Zones,
		labels:           selector(c.labelSelector),
		namespaceLabels:  selector(c.namespaceSelector),
		endpointPodNames: c.endpointPodNames,
		noEndpoints:      c.noEndpoints,
		ignoreEmpty:      c.ignoreEmpty,
		zonal:            c.zonal,
		multicluster:     c.multiclusterZones,
		ttl:              c.ttl,
		startupTimeout:   c.startupTimeout,
		qps:              c.apiQPS,
		burst:            c.apiBurst,
		maxInflight:      c.apiMaxInflight,
	}
	for name, mode := range podModes {
		if mode == c.podMode {
			m.pods = name
		}
	}
	if c.kubeconfig != "" {
		m.kubeconfigHost = hostOf(apiclient.Config(c.apiOptions()))
	}
	return m.String()
}

// hostOf is the API server a client configuration leads to.
func hostOf(rc *rest.Config, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return rc.Host
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func selector(s *meta.LabelSelector) string {
	if s == nil {
		return ""
	}
	return meta.FormatLabelSelector(s)
}

// unexported reads a field the in-tree plugin does not export.
func unexported(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// twoContextKubeconfig writes a kubeconfig whose current context and whose context "other" lead to
// different API servers, so that the context argument's meaning shows.
func twoContextKubeconfig(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	text := `apiVersion: v1
kind: Config
current-context: main
clusters:
- name: main
  cluster: {server: "https://10.0.0.1:6443"}
- name: other
  cluster: {server: "https://10.0.0.2:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: main
  context: {cluster: main, user: u}
- name: other
  context: {cluster: other, user: u}
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// inTreeOptionNames are the case labels of the in-tree parser's option switch, read from the
// source of the CoreDNS module this one builds with.
func inTreeOptionNames(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "github.com/coredns/coredns/plugin/kubernetes").Output()
	if err != nil {
		t.Fatalf("go list the in-tree plugin: %v", err)
	}
	names := optionNames(t, filepath.Join(strings.TrimSpace(string(out)), "setup.go"), func(fn string) bool { return fn == "ParseStanza" },
		func(e ast.Expr) bool { return isCall(e, "Val") })
	if len(names) < 15 {
		t.Fatalf("read %d options from the in-tree parser: %v; the parser has moved", len(names), names)
	}
	return names
}

// optionNames are the string case labels of the switches in the functions of file that isParser
// accepts whose tag isTag accepts: a parser's options.
func optionNames(t *testing.T, file string, isParser func(fn string) bool, isTag func(ast.Expr) bool) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		decl, ok := n.(*ast.FuncDecl)
		if !ok || !isParser(decl.Name.Name) {
			return true
		}
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok || sw.Tag == nil || !isTag(sw.Tag) {
				return true
			}
			for _, s := range sw.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ := strconv.Unquote(lit.Value)
						names = append(names, name)
					}
				}
			}
			return false
		})
		return false
	})
	return names
}

// isCall reports whether e is a call of a method named name: c.Val().
func isCall(e ast.Expr, name string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}

// TestEveryOptionBeyondTheInTreePluginIsListed: the options of kubetree's parser that the in-tree
// parser does not have are refused by the in-tree plugin, and are exactly the rows of docs/differences.md's
// "Beyond the in-tree plugin" table.
func TestEveryOptionBeyondTheInTreePluginIsListed(t *testing.T) {
	inTree := inTreeOptionNames(t)
	table := optionTable(t, "## Beyond the in-tree plugin")
	beyond := map[string]bool{}
	isParser := func(fn string) bool { return strings.HasPrefix(fn, "parse") && strings.HasSuffix(fn, "Option") }
	for _, option := range optionNames(t, "setup.go", isParser, func(e ast.Expr) bool {
		id, ok := e.(*ast.Ident)
		return ok && id.Name == "name"
	}) {
		if slices.Contains(inTree, option) {
			continue
		}
		beyond[option] = true
		if _, err := parseInTree("kubernetes cluster.local {\n" + option + "\n}"); err == nil || !strings.Contains(err.Error(), "unknown property") {
			t.Errorf("%s: the in-tree plugin does not refuse it as unknown: %v", option, err)
		}
		if _, ok := table[option]; !ok {
			t.Errorf("the table of options beyond the in-tree plugin has no row for %q", option)
		}
	}
	for option := range table {
		if !beyond[option] {
			t.Errorf("the table of options beyond the in-tree plugin lists %q, which kubetree's parser has not, or the in-tree parser has too", option)
		}
	}
	if len(beyond) == 0 {
		t.Fatal("read no option of kubetree's own from setup.go; the parser has moved")
	}
}

// optionTable is one of docs/differences.md's option tables, under heading: option -> the rest of its row.
func optionTable(t *testing.T, heading string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("docs/differences.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), heading+"\n")
	if !ok {
		t.Fatalf("docs/differences.md has no %q section", heading)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(after, "\n")[1:] {
		if strings.HasPrefix(line, "#") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(strings.Join(cells[2:len(cells)-1], "|"))
	}
	return rows
}
