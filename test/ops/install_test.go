package ops

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestPluginCfgBuild follows the README's third install route: CoreDNS's own v1.15.0 source (from the
// Go module proxy), the plugin.cfg lines added just before kubernetes:kubernetes and
// k8s_external:k8s_external, go generate, go build. The binary lists kubetree and kubetree_external,
// puts them in the places of the kubernetes and k8s_external plugins, and answers from a kubetree
// stanza with a kubetree_external beside it. KUBETREE_PLUGINCFG_COREDNS names another CoreDNS
// release to build (`make compat` tries each it lists).
func TestPluginCfgBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds CoreDNS")
	}
	version := cmp.Or(os.Getenv("KUBETREE_PLUGINCFG_COREDNS"), "v1.15.0")
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/coredns/coredns@"+version).Output()
	if err != nil {
		t.Fatalf("go mod download: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %v %s", err, out)
	}
	src := filepath.Join(t.TempDir(), "coredns")
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		t.Fatal(err)
	}
	// The module cache is read-only; the checkout a user has is not.
	filepath.WalkDir(src, func(p string, d fs.DirEntry, _ error) error {
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})

	cfg, err := os.ReadFile(filepath.Join(src, "plugin.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	// As the README says.
	const line, external = "kubetree:github.com/kubetree/kubetree\n", "kubetree_external:github.com/kubetree/kubetree/external\n"
	cfg = bytes.Replace(cfg, []byte("kubernetes:kubernetes\n"), []byte(line+"kubernetes:kubernetes\n"), 1)
	cfg = bytes.Replace(cfg, []byte("k8s_external:k8s_external\n"), []byte(external+"k8s_external:k8s_external\n"), 1)
	if err := os.WriteFile(filepath.Join(src, "plugin.cfg"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	// Our module instead of a published version, with the versions cmd/coredns resolved.
	sums, err := os.ReadFile(filepath.Join(root, "cmd/coredns/go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(src, "go.sum"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(sums)
	f.Close()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = src
		// -trimpath and the environment's CGO_ENABLED=0 (make ops-test) as make build compiles
		// cmd/coredns: the same packages at the same versions come from the build cache, so the
		// test links CoreDNS instead of compiling it a second time.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false -trimpath")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("go", "mod", "edit", "-require=github.com/kubetree/kubetree@v0.0.0", "-replace=github.com/kubetree/kubetree="+absRoot(t))
	run("go", "generate", "coredns.go")
	run("go", "build", "-o", "coredns", ".")

	directives, err := os.ReadFile(filepath.Join(src, "core/dnsserver/zdirectives.go"))
	if err != nil {
		t.Fatal(err)
	}
	if i, j := bytes.Index(directives, []byte(`"kubetree"`)), bytes.Index(directives, []byte(`"kubernetes"`)); i < 0 || i > j {
		t.Errorf("kubetree is not just before kubernetes in the plugin order:\n%s", directives)
	}
	if i, j := bytes.Index(directives, []byte(`"kubetree_external"`)), bytes.Index(directives, []byte(`"k8s_external"`)); i < 0 || i > j {
		t.Errorf("kubetree_external is not just before k8s_external in the plugin order:\n%s", directives)
	}
	plugins, err := exec.Command(filepath.Join(src, "coredns"), "-plugins").Output()
	if err != nil || !slices.Contains(strings.Fields(string(plugins)), "kubetree") || !slices.Contains(strings.Fields(string(plugins)), "kubetree_external") {
		t.Fatalf("coredns -plugins: %v\n%s", err, plugins)
	}

	// It serves: the apex records a kubetree zone has before any sync (no API server here).
	addr := freeDNSAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	corefile := filepath.Join(src, "Corefile")
	os.WriteFile(corefile, []byte(".:"+port+" {\n    bind 127.0.0.1\n    kubetree_external example.org\n    kubetree cluster.local {\n        endpoint https://127.0.0.1:1\n        startup_timeout 0s\n    }\n}\n"), 0o644)
	server := exec.Command(filepath.Join(src, "coredns"), "-conf", corefile)
	var log bytes.Buffer
	server.Stdout, server.Stderr = &log, &log
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { server.Process.Kill(); server.Wait() }()
	q := new(dns.Msg)
	q.SetQuestion("dns-version.cluster.local.", dns.TypeTXT)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(q, addr)
		if err == nil && len(r.Answer) == 1 && strings.Contains(r.Answer[0].String(), `"1.1.0"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dns-version answer from the built CoreDNS: %v %v\n%s", r, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// kubetree_external found its kubetree at startup (else CoreDNS would not have started) and
	// answers its apex.
	q.SetQuestion("example.org.", dns.TypeSOA)
	r, _, err := (&dns.Client{Timeout: time.Second}).Exchange(q, addr)
	if err != nil || len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "ns1.dns.example.org.") {
		t.Errorf("no kubetree_external apex SOA from the built CoreDNS: %v %v\n%s", r, err, log.String())
	}
}

func absRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// freeDNSAddr is a loopback address whose port is free for both TCP and UDP, as CoreDNS listens on both.
func freeDNSAddr(t *testing.T) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		p, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			p.Close()
			return addr
		}
	}
	t.Fatal("no loopback port free for both TCP and UDP")
	return ""
}
