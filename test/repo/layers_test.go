package repo

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers is what each package of the module may import, of the module and of the layers below it
// outside the module: imports point one way, down. The tree knows nothing of Kubernetes or of DNS
// records; the model knows client-go's types and nothing of DNS; the wire decodes the API server's
// protobuf into the model, which knows nothing of it; the records know DNS and the model, not
// client-go; the API client knows client-go and nothing of the module; the informers know client-go,
// the API client and the wire's watch events, not the model; the watcher, a controller over them,
// knows the model too, not DNS, and hands changes to the write side through an interface; the
// applier (the write side) and the query package (the read side) know the records and the model,
// not client-go, and not each other; explain and the probe read through the query package;
// explainapi, the HTTP API of explain's /explain and /dump that the kubectl plugin shares, knows
// nothing but the standard library; kubetree_external reaches kubetree only through its Cluster
// interface; the root glues it all into CoreDNS. The kubectl plugin's packages take of the module
// explainapi alone, so that its binary carries nothing of CoreDNS or of the plugin.
// The test-only packages (testOnly) stand apart: they are the harnesses of the tests, any of them
// may import anything of the module, the root too (internal/plugintest builds the whole plugin),
// and no production package may import them.
var layers = []struct {
	dir    string   // the package's folder
	module []string // the module's packages it may import
	never  []string // import path prefixes it must not import
}{
	{"internal/tree", nil, []string{"k8s.io/", "sigs.k8s.io/", "github.com/miekg/dns", "github.com/coredns/"}},
	{"internal/buildinfo", nil, []string{"k8s.io/", "sigs.k8s.io/", "github.com/miekg/dns", "github.com/coredns/"}},
	{"internal/object", nil, []string{"github.com/miekg/dns", "github.com/coredns/"}},
	{"internal/wire", []string{"internal/object"}, []string{"github.com/miekg/dns", "github.com/coredns/", "k8s.io/client-go/tools/"}},
	{"internal/records", []string{"internal/object", "internal/tree"}, []string{"k8s.io/client-go", "k8s.io/api/", "sigs.k8s.io/", "github.com/coredns/"}},
	{"internal/metrics", nil, []string{"k8s.io/", "sigs.k8s.io/", "github.com/miekg/dns"}},
	{"internal/apiclient", nil, []string{"github.com/miekg/dns", "github.com/coredns/"}},
	{"internal/informer", []string{"internal/apiclient", "internal/metrics", "internal/wire"}, []string{"github.com/miekg/dns", "github.com/coredns/coredns/request", "github.com/coredns/coredns/core/"}},
	{"internal/watcher", []string{"internal/apiclient", "internal/informer", "internal/metrics", "internal/object", "internal/wire"}, []string{"github.com/miekg/dns", "github.com/coredns/coredns/request", "github.com/coredns/coredns/core/"}},
	{"internal/applier", []string{"internal/metrics", "internal/object", "internal/records", "internal/tree"}, []string{"k8s.io/", "sigs.k8s.io/"}},
	{"internal/query", []string{"internal/metrics", "internal/object", "internal/records", "internal/tree"}, []string{"k8s.io/client-go", "k8s.io/api/", "sigs.k8s.io/"}},
	{"internal/probe", []string{"internal/metrics", "internal/query"}, []string{"k8s.io/", "sigs.k8s.io/"}},
	{"internal/explainapi", nil, []string{"k8s.io/", "sigs.k8s.io/", "github.com/miekg/dns", "github.com/coredns/"}},
	{"internal/explain", []string{"internal/explainapi", "internal/object", "internal/query", "internal/records", "internal/tree"}, []string{"k8s.io/client-go", "k8s.io/api/", "sigs.k8s.io/"}},
	{"external", []string{"internal/records", "internal/tree"}, []string{"k8s.io/", "sigs.k8s.io/"}},
	{".", []string{"internal/apiclient", "internal/applier", "internal/buildinfo", "internal/explain", "internal/explainapi", "internal/metrics", "internal/object", "internal/probe",
		"internal/query", "internal/records", "internal/tree", "internal/watcher"}, nil},
	{"cmd/kubectl-kubetree/internal/replica", nil, []string{"github.com/coredns/", "github.com/miekg/dns"}},
	{"cmd/kubectl-kubetree/internal/doctor", []string{"cmd/kubectl-kubetree/internal/replica"}, []string{"github.com/coredns/", "github.com/miekg/dns"}},
	{"cmd/kubectl-kubetree/internal/ask", []string{"internal/explainapi"}, []string{"github.com/coredns/"}},
	{"cmd/kubectl-kubetree/internal/cli", []string{"cmd/kubectl-kubetree/internal/ask", "cmd/kubectl-kubetree/internal/doctor", "cmd/kubectl-kubetree/internal/replica",
		"internal/explainapi"}, []string{"github.com/coredns/", "github.com/miekg/dns"}},
	{"cmd/kubectl-kubetree", []string{"cmd/kubectl-kubetree/internal/cli"}, []string{"github.com/coredns/", "github.com/miekg/dns"}},
}

// rootFiles are the production files of the root package, the glue into CoreDNS: the design card's
// plugin, setup, handler, tree and watch (the wiring of the layers), and the companions' hooks. A
// concern that needs a file of its own needs a package of its own.
var rootFiles = []string{
	"autopath.go", // autopath's AutoPather: the client pod's search path
	"external.go", // kubetree_external's Cluster
	"fortests.go", // NewForTests: the plugin wired without a watcher, internal/plugintest's way in
	"handler.go",  // ServeDNS
	"local.go",    // the server block's addresses and metrics label
	"metadata.go", // metadata's Provider
	"parse.go",    // the Corefile, read into the configuration
	"plugin.go",   // the plugin, its Corefile configuration, Ready
	"setup.go",    // register, lifecycle, the checks against the other plugins
	"tree.go",     // the published state, the answerer and the applier
	"watch.go",    // the watcher, as the Corefile asks
	"xfr.go",      // transfer's Transferer
}

// testOnly are the packages that only tests import: fakes and harnesses, which have no row in
// layers.
var testOnly = []string{"internal/k8stest", "internal/plugintest"}

const modulePath = "github.com/kubetree/kubetree"

// TestLayers: no package imports one above it, a library its layer must not know, or a test-only
// package; every production package of the module is in the table; and the root holds glue only,
// its production files and their tests.
func TestLayers(t *testing.T) {
	for _, l := range layers {
		for _, path := range productionImports(t, l.dir) {
			if rel, ok := strings.CutPrefix(path, modulePath+"/"); ok {
				if slices.Contains(testOnly, rel) {
					t.Errorf("%s imports %s, a test-only package", l.dir, rel)
					continue
				}
				if !slices.Contains(l.module, rel) {
					t.Errorf("%s imports %s: not a layer below it", l.dir, rel)
				}
				continue
			}
			if path == modulePath {
				t.Errorf("%s imports the root package", l.dir)
			}
			for _, p := range l.never {
				if strings.HasPrefix(path, p) {
					t.Errorf("%s imports %s, which its layer must not know", l.dir, path)
				}
			}
		}
	}
	root := productionFiles(t, ".")
	if len(root) > 12 {
		t.Errorf("%d production files at the root, want at most 12: %v", len(root), root)
	}
	// The root's tests are the glue's; the whole plugin's are under test/ (docs/development.md).
	if tests, _ := filepath.Glob("*_test.go"); len(tests) > 12 {
		t.Errorf("%d test files at the root, want at most 12: %v", len(tests), tests)
	}
	for _, f := range root {
		if !slices.Contains(rootFiles, f) {
			t.Errorf("%s is a production file at the root that rootFiles does not list: the root is glue only", f)
		}
	}
	var dirs []string
	for _, root := range []string{"internal", "external", "cmd/kubectl-kubetree"} {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, _ error) error {
			if d != nil && d.IsDir() && d.Name() != "testdata" && len(productionFiles(t, p)) > 0 {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	for _, d := range dirs {
		if !slices.Contains(testOnly, d) && !slices.ContainsFunc(layers, func(l struct {
			dir           string
			module, never []string
		}) bool {
			return l.dir == d
		}) {
			t.Errorf("package %s has no row in layers", d)
		}
	}
}

func productionFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
}

// productionImports are the import paths of dir's non-test files.
func productionImports(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, f := range productionFiles(t, dir) {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			out = append(out, path)
		}
	}
	return out
}
