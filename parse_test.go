package kubetree

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/netip"
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
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/kubetree/kubetree/internal/apiclient"
	"github.com/kubetree/kubetree/internal/probe"
	"github.com/kubetree/kubetree/internal/query"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// withConfig is the default configuration changed by set.
func withConfig(set func(c *config)) config {
	c := defaultConfig()
	set(&c)
	return c
}

func TestParse(t *testing.T) {
	cl := []string{"cluster.local."}
	tests := []struct {
		name    string
		input   string
		keys    []string // server block keys
		err     string   // expected error substring; "" for success
		zones   []string
		forward []string
		fall    fall.F
		cfg     config
	}{
		// Zones.
		{name: "zone from args", input: `kubetree cluster.local`, zones: cl, forward: cl, cfg: defaultConfig()},
		{name: "zones from args are normalized", input: `kubetree Cluster.Local. Example.ORG`,
			zones: []string{"cluster.local.", "example.org."}, forward: []string{"cluster.local.", "example.org."}, cfg: defaultConfig()},
		{name: "zones from server block keys", input: `kubetree`, keys: []string{"dns://cluster.local.:1053", "in-addr.arpa.:1053"},
			zones: []string{"cluster.local.", "in-addr.arpa."}, forward: cl, cfg: defaultConfig()},
		{name: "args win over server block keys", input: `kubetree cluster.local`, keys: []string{"example.org.:53"},
			zones: cl, forward: cl, cfg: defaultConfig()},
		{name: "CIDR zones become reverse zones", input: `kubetree cluster.local 10.0.0.0/8 fd00::/8`,
			zones: []string{"cluster.local.", "10.in-addr.arpa.", "d.f.ip6.arpa."}, forward: cl, cfg: defaultConfig()},
		{name: "a CIDR off an octet boundary is split into zones", input: `kubetree 10.0.0.0/15 cluster.local`,
			zones: []string{"0.10.in-addr.arpa.", "1.10.in-addr.arpa.", "cluster.local."}, forward: cl, cfg: defaultConfig()},
		{name: "the bare reverse zones", input: `kubetree cluster.local in-addr.arpa ip6.arpa`,
			zones: []string{"cluster.local.", "in-addr.arpa.", "ip6.arpa."}, forward: cl, cfg: defaultConfig()},
		{name: "an empty block", input: "kubetree cluster.local {\n}", zones: cl, forward: cl, cfg: defaultConfig()},
		{name: "reverse CIDR zone only", input: `kubetree 10.0.0.0/8`, err: "needs a zone that is not a reverse zone"},
		{name: "bare reverse zones only", input: `kubetree in-addr.arpa ip6.arpa`, err: "needs a zone that is not a reverse zone"},
		{name: "reverse server block keys only", input: `kubetree`, keys: []string{"10.in-addr.arpa.:53"}, err: "needs a zone that is not a reverse zone"},
		{name: "the root zone from args", input: `kubetree . cluster.local`, err: "cannot serve the root zone"},
		{name: "the root zone from a server block key", input: `kubetree`, keys: []string{".:53"}, err: "cannot serve the root zone"},
		{name: "a second stanza", input: "kubetree cluster.local\nkubetree example.org", err: "can only be used once per Server Block"},
		{name: "no stanza", input: ``, err: "no kubetree stanza"},

		// endpoint and tls.
		{name: "endpoint", input: "kubetree cluster.local {\n\tendpoint https://10.0.0.1:6443\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.endpoint = "https://10.0.0.1:6443" })},
		{name: "endpoint: the first of several", input: "kubetree cluster.local {\n\tendpoint https://a:6443 https://b:6443\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.endpoint = "https://a:6443" })},
		{name: "endpoint without a value", input: "kubetree cluster.local {\n\tendpoint\n}", err: "Wrong argument count"},
		{name: "tls", input: "kubetree cluster.local {\n\ttls cert.pem key.pem ca.pem\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.tlsCert, c.tlsKey, c.tlsCA = "cert.pem", "key.pem", "ca.pem" })},
		{name: "tls with two files", input: "kubetree cluster.local {\n\ttls cert.pem key.pem\n}", err: "Wrong argument count"},
		{name: "tls with four files", input: "kubetree cluster.local {\n\ttls a b c d\n}", err: "Wrong argument count"},

		// kubeconfig.
		{name: "kubeconfig", input: "kubetree cluster.local {\n\tkubeconfig /etc/kube.conf\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.kubeconfig = "/etc/kube.conf" })},
		{name: "kubeconfig with context", input: "kubetree cluster.local {\n\tkubeconfig /etc/kube.conf prod\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.kubeconfig, c.kubeContext = "/etc/kube.conf", "prod" })},
		{name: "kubeconfig without a file", input: "kubetree cluster.local {\n\tkubeconfig\n}", err: "Wrong argument count"},
		{name: "kubeconfig with three values", input: "kubetree cluster.local {\n\tkubeconfig a b c\n}", err: "Wrong argument count"},

		// namespaces and selectors.
		{name: "namespaces", input: "kubetree cluster.local {\n\tnamespaces prod staging\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.namespaces = map[string]bool{"prod": true, "staging": true} })},
		{name: "namespaces without a value", input: "kubetree cluster.local {\n\tnamespaces\n}", err: "Wrong argument count"},
		{name: "namespace_labels", input: "kubetree cluster.local {\n\tnamespace_labels team=dns\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) {
				c.namespaceSelector = &meta.LabelSelector{MatchLabels: map[string]string{"team": "dns"}, MatchExpressions: []meta.LabelSelectorRequirement{}}
			})},
		{name: "labels, an expression over several arguments", input: "kubetree cluster.local {\n\tlabels environment in (prod, staging)\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) {
				c.labelSelector = &meta.LabelSelector{MatchLabels: map[string]string{}, MatchExpressions: []meta.LabelSelectorRequirement{
					{Key: "environment", Operator: meta.LabelSelectorOpIn, Values: []string{"prod", "staging"}}}}
			})},
		{name: "namespace_labels without a value", input: "kubetree cluster.local {\n\tnamespace_labels\n}", err: "Wrong argument count"},
		{name: "labels without a value", input: "kubetree cluster.local {\n\tlabels\n}", err: "Wrong argument count"},
		{name: "namespace_labels bad selector", input: "kubetree cluster.local {\n\tnamespace_labels team in (dns\n}", err: "unable to parse namespace_labels selector"},
		{name: "labels bad selector", input: "kubetree cluster.local {\n\tlabels =web\n}", err: "unable to parse labels selector"},
		{name: "namespaces and namespace_labels together", input: "kubetree cluster.local {\n\tnamespaces prod\n\tnamespace_labels team=dns\n}",
			err: "namespaces and namespace_labels cannot both be set"},
		{name: "namespace_labels and namespaces together", input: "kubetree cluster.local {\n\tnamespace_labels team=dns\n\tnamespaces prod\n}",
			err: "namespaces and namespace_labels cannot both be set"},

		// pods.
		{name: "pods disabled", input: "kubetree cluster.local {\n\tpods disabled\n}", zones: cl, forward: cl, cfg: defaultConfig()},
		{name: "pods insecure", input: "kubetree cluster.local {\n\tpods insecure\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.podMode = query.PodsInsecure })},
		{name: "pods verified", input: "kubetree cluster.local {\n\tpods verified\n}", zones: cl, forward: cl, cfg: withConfig(func(c *config) { c.podMode = query.PodsVerified })},
		{name: "client_subnet_from, networks and addresses", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from 169.254.20.10 10.0.0.0/8 fd00::1\n}",
			zones: cl, forward: cl, cfg: withConfig(func(c *config) {
				c.podMode = query.PodsVerified
				c.clientSubnetFrom = []netip.Prefix{netip.MustParsePrefix("169.254.20.10/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::1/128")}
			})},
		{name: "audit_interval", input: "kubetree cluster.local {\n\taudit_interval 3m\n}",
			zones: cl, forward: cl, cfg: withConfig(func(c *config) { c.auditInterval = 3 * time.Minute })},
		{name: "audit_interval 0 turns the audit off", input: "kubetree cluster.local {\n\taudit_interval 0\n}",
			zones: cl, forward: cl, cfg: withConfig(func(c *config) { c.auditInterval = 0 })},
		{name: "audit_interval too short", input: "kubetree cluster.local {\n\taudit_interval 1s\n}", err: "audit_interval must be 0"},
		{name: "apiserver_max_inflight", input: "kubetree cluster.local {\n\tapiserver_max_inflight 10\n}",
			zones: cl, forward: cl, cfg: withConfig(func(c *config) { c.apiMaxInflight = 10 })},
		{name: "apiserver_max_inflight negative", input: "kubetree cluster.local {\n\tapiserver_max_inflight -1\n}", err: "apiserver_max_inflight must be a whole number"},
		{name: "client_subnet_from needs pods verified", input: "kubetree cluster.local {\n\tclient_subnet_from 10.0.0.0/8\n}", err: "client_subnet_from needs pods verified"},
		{name: "client_subnet_from takes networks", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from nodelocal\n}", err: "client_subnet_from takes networks"},
		{name: "client_subnet_from takes at least one", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from\n}", err: "Wrong argument count"},
		{name: "topology", input: "kubetree cluster.local {\n\tpods verified\n\ttopology\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.podMode, c.topology = query.PodsVerified, true })},
		{name: "topology needs pods verified", input: "kubetree cluster.local {\n\tpods insecure\n\ttopology\n}", err: "topology needs pods verified"},
		{name: "topology needs endpoints", input: "kubetree cluster.local {\n\tpods verified\n\tnoendpoints\n\ttopology\n}", err: "topology needs the endpoints"},
		{name: "topology takes no argument", input: "kubetree cluster.local {\n\tpods verified\n\ttopology zone\n}", err: "Wrong argument count"},
		{name: "pods unknown mode", input: "kubetree cluster.local {\n\tpods sometimes\n}", err: "wrong value for pods: sometimes"},
		{name: "pods without a mode", input: "kubetree cluster.local {\n\tpods\n}", err: "Wrong argument count"},
		{name: "pods with two modes", input: "kubetree cluster.local {\n\tpods insecure disabled\n}", err: "Wrong argument count"},

		// Flags.
		{name: "endpoint_pod_names", input: "kubetree cluster.local {\n\tendpoint_pod_names\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.endpointPodNames = true })},
		{name: "endpoint_pod_names with a value", input: "kubetree cluster.local {\n\tendpoint_pod_names yes\n}", err: "Wrong argument count"},
		{name: "noendpoints", input: "kubetree cluster.local {\n\tnoendpoints\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.noEndpoints = true })},
		{name: "noendpoints with a value", input: "kubetree cluster.local {\n\tnoendpoints yes\n}", err: "Wrong argument count"},
		{name: "ignore empty_service", input: "kubetree cluster.local {\n\tignore empty_service\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.ignoreEmpty = true })},
		{name: "ignore something else", input: "kubetree cluster.local {\n\tignore empty_namespace\n}", err: `unable to parse ignore value: "empty_namespace"`},
		{name: "ignore without a value", input: "kubetree cluster.local {\n\tignore\n}", err: "Wrong argument count"},
		{name: "ignore with two values", input: "kubetree cluster.local {\n\tignore empty_service empty_service\n}", err: "Wrong argument count"},

		// ttl.
		{name: "ttl", input: "kubetree cluster.local {\n\tttl 30\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.ttl = 30 })},
		{name: "ttl 0", input: "kubetree cluster.local {\n\tttl 0\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.ttl = 0 })},
		{name: "ttl 3600", input: "kubetree cluster.local {\n\tttl 3600\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.ttl = 3600 })},
		{name: "ttl above 3600", input: "kubetree cluster.local {\n\tttl 3601\n}", err: `ttl must be a whole number of seconds in [0, 3600], got "3601"`},
		{name: "ttl negative", input: "kubetree cluster.local {\n\tttl -1\n}", err: `ttl must be a whole number of seconds in [0, 3600], got "-1"`},
		{name: "ttl not a number", input: "kubetree cluster.local {\n\tttl 5s\n}", err: `ttl must be a whole number of seconds in [0, 3600], got "5s"`},
		{name: "ttl without a value", input: "kubetree cluster.local {\n\tttl\n}", err: "Wrong argument count"},
		{name: "ttl with two values", input: "kubetree cluster.local {\n\tttl 5 10\n}", err: "Wrong argument count"},
		{name: "negative_ttl", input: "kubetree cluster.local {\n\tnegative_ttl 1\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.negativeTTL = 1 })},
		{name: "negative_ttl 0", input: "kubetree cluster.local {\n\tnegative_ttl 0\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.negativeTTL = 0 })},
		{name: "negative_ttl 3600, longer than the ttl", input: "kubetree cluster.local {\n\tnegative_ttl 3600\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.negativeTTL = 3600 })},
		{name: "negative_ttl above 3600", input: "kubetree cluster.local {\n\tnegative_ttl 3601\n}", err: `negative_ttl must be a whole number of seconds in [0, 3600], got "3601"`},
		{name: "negative_ttl negative", input: "kubetree cluster.local {\n\tnegative_ttl -1\n}", err: `negative_ttl must be a whole number of seconds in [0, 3600], got "-1"`},
		{name: "negative_ttl not a number", input: "kubetree cluster.local {\n\tnegative_ttl 1s\n}", err: `negative_ttl must be a whole number of seconds in [0, 3600], got "1s"`},
		{name: "negative_ttl without a value", input: "kubetree cluster.local {\n\tnegative_ttl\n}", err: "Wrong argument count"},
		{name: "negative_ttl with two values", input: "kubetree cluster.local {\n\tnegative_ttl 1 2\n}", err: "Wrong argument count"},

		// probe.
		{name: "probe: kubernetes.default every 5 s, not ready after 3 misses", input: "kubetree cluster.local {\n\tprobe\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) {
				c.probe = &probe.Options{Name: "kubernetes.default.svc.cluster.local.", Interval: 5 * time.Second, Misses: 3}
			})},
		{name: "probe NAME, lower case and fully qualified", input: "kubetree cluster.local {\n\tprobe Web.Prod.svc.cluster.local\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) {
				c.probe = &probe.Options{Name: "web.prod.svc.cluster.local.", Interval: 5 * time.Second, Misses: 3}
			})},
		{name: "probe NAME INTERVAL MISSES", input: "kubetree cluster.local {\n\tprobe web.prod.svc.cluster.local. 10s 5\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) {
				c.probe = &probe.Options{Name: "web.prod.svc.cluster.local.", Interval: 10 * time.Second, Misses: 5}
			})},
		{name: "probe: the first zone of services", input: "kubetree clusterset.local cluster.local {\n\tmulticluster clusterset.local\n\tprobe\n}",
			zones: []string{"clusterset.local.", "cluster.local."}, forward: []string{"clusterset.local.", "cluster.local."},
			cfg: withConfig(func(c *config) {
				c.multiclusterZones = []string{"clusterset.local."}
				c.probe = &probe.Options{Name: "kubernetes.default.svc.cluster.local.", Interval: 5 * time.Second, Misses: 3}
			})},
		{name: "probe: namespaces with default", input: "kubetree cluster.local {\n\tnamespaces default prod\n\tprobe\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) {
				c.namespaces = map[string]bool{"default": true, "prod": true}
				c.probe = &probe.Options{Name: "kubernetes.default.svc.cluster.local.", Interval: 5 * time.Second, Misses: 3}
			})},
		{name: "probe: namespaces without default", input: "kubetree cluster.local {\n\tnamespaces prod shop\n\tprobe\n}",
			err: "probe needs a NAME: kubernetes.default is not served with namespaces [prod shop]"},
		{name: "probe NAME outside the zones", input: "kubetree cluster.local {\n\tprobe kubernetes.default.svc.example.org\n}",
			err: `probe NAME must be a name in the zones of this stanza [cluster.local.], got "kubernetes.default.svc.example.org"`},
		{name: "probe NAME not a name", input: "kubetree cluster.local {\n\tprobe web..cluster.local\n}",
			err: `probe NAME must be a name in the zones of this stanza [cluster.local.], got "web..cluster.local"`},
		{name: "probe INTERVAL below 1s", input: "kubetree cluster.local {\n\tprobe kubernetes.default.svc.cluster.local 500ms\n}",
			err: `probe INTERVAL must be a duration of at least 1s, got "500ms"`},
		{name: "probe INTERVAL not a duration", input: "kubetree cluster.local {\n\tprobe kubernetes.default.svc.cluster.local 5\n}",
			err: `probe INTERVAL must be a duration of at least 1s, got "5"`},
		{name: "probe MISSES 0", input: "kubetree cluster.local {\n\tprobe kubernetes.default.svc.cluster.local 5s 0\n}",
			err: `probe MISSES must be a whole number in [1, 100], got "0"`},
		{name: "probe MISSES too many", input: "kubetree cluster.local {\n\tprobe kubernetes.default.svc.cluster.local 5s 101\n}",
			err: `probe MISSES must be a whole number in [1, 100], got "101"`},
		{name: "probe with four values", input: "kubetree cluster.local {\n\tprobe kubernetes.default.svc.cluster.local 5s 3 SRV\n}", err: "Wrong argument count"},
		// explain.
		{name: "explain: on loopback", input: "kubetree cluster.local {\n\texplain\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.explain = "127.0.0.1:9155" })},
		{name: "explain ADDRESS", input: "kubetree cluster.local {\n\texplain :8155\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.explain = ":8155" })},
		{name: "explain ADDRESS without a port", input: "kubetree cluster.local {\n\texplain 127.0.0.1\n}",
			err: `explain ADDRESS must be host:port, such as 127.0.0.1:9155, got "127.0.0.1"`},
		{name: "explain with two addresses", input: "kubetree cluster.local {\n\texplain :1 :2\n}", err: "Wrong argument count"},

		// fallthrough.
		{name: "fallthrough everywhere", input: "kubetree cluster.local {\n\tfallthrough\n}", zones: cl, forward: cl,
			fall: fall.Root, cfg: defaultConfig()},
		{name: "fallthrough in some zones", input: "kubetree cluster.local {\n\tfallthrough in-addr.arpa Ip6.Arpa\n}", zones: cl, forward: cl,
			fall: fall.F{Zones: []string{"in-addr.arpa.", "ip6.arpa."}}, cfg: defaultConfig()},

		// startup_timeout.
		{name: "startup_timeout", input: "kubetree cluster.local {\n\tstartup_timeout 30s\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.startupTimeout = 30 * time.Second })},
		{name: "startup_timeout 0", input: "kubetree cluster.local {\n\tstartup_timeout 0s\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.startupTimeout = 0 })},
		{name: "startup_timeout bad duration", input: "kubetree cluster.local {\n\tstartup_timeout 30\n}", err: `startup_timeout must be a non-negative duration such as 5s, got "30"`},
		{name: "startup_timeout negative", input: "kubetree cluster.local {\n\tstartup_timeout -1s\n}", err: `startup_timeout must be a non-negative duration such as 5s, got "-1s"`},
		{name: "startup_timeout without a value", input: "kubetree cluster.local {\n\tstartup_timeout\n}", err: "Wrong argument count"},

		// API client limits.
		{name: "apiserver_qps", input: "kubetree cluster.local {\n\tapiserver_qps 12.5\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.apiQPS = 12.5 })},
		{name: "apiserver_qps negative", input: "kubetree cluster.local {\n\tapiserver_qps -1\n}", err: `apiserver_qps must be a number >= 0, got "-1"`},
		{name: "apiserver_qps not a number", input: "kubetree cluster.local {\n\tapiserver_qps fast\n}", err: `apiserver_qps must be a number >= 0, got "fast"`},
		{name: "apiserver_qps without a value", input: "kubetree cluster.local {\n\tapiserver_qps\n}", err: "Wrong argument count"},
		{name: "apiserver_burst", input: "kubetree cluster.local {\n\tapiserver_burst 40\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.apiBurst = 40 })},
		{name: "apiserver_burst negative", input: "kubetree cluster.local {\n\tapiserver_burst -1\n}", err: `apiserver_burst must be a whole number >= 0, got "-1"`},
		{name: "apiserver_burst not whole", input: "kubetree cluster.local {\n\tapiserver_burst 1.5\n}", err: `apiserver_burst must be a whole number >= 0, got "1.5"`},
		{name: "apiserver_burst with two values", input: "kubetree cluster.local {\n\tapiserver_burst 1 2\n}", err: "Wrong argument count"},

		// An option given twice: refused, naming it and both lines, but for the options whose lines
		// add up. The last line used to win, silently.
		{name: "isolate twice", input: "kubetree cluster.local {\n\tpods verified\n\tisolate refuse\n\tisolate allow\n}",
			err: "Testfile:4 - Error during parsing: isolate is given twice, on line 3 and on line 4: give it once"},
		{name: "isolate_labels twice", input: "kubetree cluster.local {\n\tpods verified\n\tisolate refuse\n\tisolate_labels a=b\n\n\tisolate_labels c=d\n}",
			err: "isolate_labels is given twice, on line 4 and on line 6: give it once"},
		{name: "negative_ttl twice", input: "kubetree cluster.local {\n\tnegative_ttl 5\n\tttl 30\n\tnegative_ttl 60\n}",
			err: "negative_ttl is given twice, on line 2 and on line 4: give it once"},
		{name: "explain twice", input: "kubetree cluster.local {\n\texplain\n\texplain :8155\n}", err: "explain is given twice, on line 2 and on line 3: give it once"},
		{name: "probe twice", input: "kubetree cluster.local {\n\tprobe\n\tprobe kubernetes.default.svc.cluster.local 10s\n}",
			err: "probe is given twice, on line 2 and on line 3: give it once"},
		{name: "topology twice", input: "kubetree cluster.local {\n\tpods verified\n\ttopology\n\ttopology\n}", err: "topology is given twice, on line 3 and on line 4: give it once"},
		{name: "pods twice", input: "kubetree cluster.local {\n\tpods verified\n\tpods disabled\n}", err: "pods is given twice, on line 2 and on line 3: give it once"},
		{name: "fallthrough twice", input: "kubetree cluster.local {\n\tfallthrough in-addr.arpa\n\tfallthrough\n}", err: "fallthrough is given twice, on line 2 and on line 3: give it once"},
		{name: "a line that repeats the first option", input: "kubetree cluster.local {\n\tttl 30\n\tendpoint https://a:6443\n\tttl 30\n}", err: "ttl is given twice, on line 2 and on line 4: give it once"},
		{name: "namespaces lines add up, as in the in-tree plugin", input: "kubetree cluster.local {\n\tnamespaces prod\n\tnamespaces staging prod\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) { c.namespaces = map[string]bool{"prod": true, "staging": true} })},
		{name: "client_subnet_from lines add up", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from 169.254.20.10\n\tclient_subnet_from 10.244.0.1/32\n}",
			zones: cl, forward: cl, cfg: withConfig(func(c *config) {
				c.podMode = query.PodsVerified
				c.clientSubnetFrom = []netip.Prefix{netip.MustParsePrefix("169.254.20.10/32"), netip.MustParsePrefix("10.244.0.1/32")}
			})},

		// Trusted sources so broad that they hold pods, which could then name any client.
		{name: "client_subnet_from everyone", input: "kubetree cluster.local {\n\tpods verified\n\tisolate refuse\n\tclient_subnet_from 0.0.0.0/0\n}",
			err: "client_subnet_from 0.0.0.0/0 is broader than /8: it holds pods too, and any of them could name any client (and read what isolate hides from it); " +
				"give the addresses the node-local caches send from, such as 10.244.0.1/32"},
		{name: "client_subnet_from every IPv6 address", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from ::/0\n}",
			err: "client_subnet_from ::/0 is broader than /32"},
		{name: "client_subnet_from broader than /8", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from 10.0.0.0/7\n}",
			err: "client_subnet_from 10.0.0.0/7 is broader than /8"},
		{name: "client_subnet_from broader than /32 of IPv6", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from fd00::/8\n}",
			err: "client_subnet_from fd00::/8 is broader than /32"},
		{name: "client_subnet_from an IPv6 /32", input: "kubetree cluster.local {\n\tpods verified\n\tclient_subnet_from 2001:db8::/32\n}", zones: cl, forward: cl,
			cfg: withConfig(func(c *config) {
				c.podMode = query.PodsVerified
				c.clientSubnetFrom = []netip.Prefix{netip.MustParsePrefix("2001:db8::/32")}
			})},

		// Everything at once, and what is not an option.
		{name: "every option", input: `kubetree cluster.local 10.0.0.0/8 {
	kubeconfig /etc/kube.conf ctx
	namespaces prod
	labels app=web
	pods insecure
	endpoint_pod_names
	ttl 60
	fallthrough in-addr.arpa
	ignore empty_service
	startup_timeout 1m
	apiserver_qps 5
	apiserver_burst 10
}`, zones: []string{"cluster.local.", "10.in-addr.arpa."}, forward: cl, fall: fall.F{Zones: []string{"in-addr.arpa."}},
			cfg: withConfig(func(c *config) {
				c.kubeconfig, c.kubeContext = "/etc/kube.conf", "ctx"
				c.namespaces = map[string]bool{"prod": true}
				c.labelSelector = &meta.LabelSelector{MatchLabels: map[string]string{"app": "web"}, MatchExpressions: []meta.LabelSelectorRequirement{}}
				c.podMode = query.PodsInsecure
				c.endpointPodNames = true
				c.ttl = 60
				c.ignoreEmpty = true
				c.startupTimeout = time.Minute
				c.apiQPS = 5
				c.apiBurst = 10
			})},
		{name: "unknown property", input: "kubetree cluster.local {\n\tresyncperiod 30s\n}", err: "unknown property 'resyncperiod'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = tc.keys
			k, err := parse(c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error containing %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(k.Zones, tc.zones) {
				t.Errorf("zones %q, want %q", k.Zones, tc.zones)
			}
			if !reflect.DeepEqual(k.forward, tc.forward) {
				t.Errorf("forward zones %q, want %q", k.forward, tc.forward)
			}
			if !k.Fall.Equal(tc.fall) {
				t.Errorf("fallthrough %q, want %q", k.Fall.Zones, tc.fall.Zones)
			}
			if !reflect.DeepEqual(k.cfg, tc.cfg) {
				t.Errorf("config\n%+v\nwant\n%+v", k.cfg, tc.cfg)
			}
		})
	}
}

// TestNegativeTTLDefaultsToTTL: without negative_ttl a miss is cached for the ttl, wherever the ttl
// line is; with it, for negative_ttl, before or after the ttl line.
func TestNegativeTTLDefaultsToTTL(t *testing.T) {
	for _, tc := range []struct {
		body string
		want uint32
	}{
		{body: "", want: defaultTTL},
		{body: "ttl 30", want: 30},
		{body: "ttl 0", want: 0},
		{body: "ttl 30\nnegative_ttl 1", want: 1},
		{body: "negative_ttl 1\nttl 30", want: 1},
		{body: "negative_ttl 60", want: 60},
		{body: "ttl 30\nnegative_ttl 0", want: 0},
	} {
		k, err := parse(caddy.NewTestController("dns", "kubetree cluster.local {\n"+tc.body+"\n}"))
		if err != nil {
			t.Fatalf("%q: %v", tc.body, err)
		}
		if got := k.cfg.missTTL(); got != tc.want {
			t.Errorf("%q: a miss is cached for %d s, want %d", tc.body, got, tc.want)
		}
	}
}

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
	// Each option twice: the in-tree plugin takes the last line (or, for namespaces, both), kubetree
	// refuses the second line of any option whose lines do not add up, naming both lines.
	for _, tc := range cases {
		if tc.why != "" || strings.Contains(tc.body, "\n") || tc.zones != "" {
			continue
		}
		t.Run(tc.option+" twice: "+tc.body, func(t *testing.T) {
			once, twice := " cluster.local {\n"+tc.body+"\n}", " cluster.local {\n"+tc.body+"\n"+tc.body+"\n}"
			k8sOnce, onceErr := parseInTree("kubernetes" + once)
			if onceErr != nil {
				return // refused once already: twice says nothing more
			}
			k8sTwice, err := parseInTree("kubernetes" + twice)
			if err != nil {
				t.Fatalf("the in-tree plugin refuses a repeated line: %v; take %q out of docs/differences.md", err, repeatRefused)
			}
			if inTreeMeaning(t, k8sTwice) != inTreeMeaning(t, k8sOnce) {
				t.Fatalf("to the in-tree plugin a repeated line means something else than one")
			}
			kt, ourErr := parse(caddy.NewTestController("dns", "kubetree"+twice))
			if options[tc.option].adds {
				if ourErr != nil || ourMeaning(t, kt) != inTreeMeaning(t, k8sTwice) {
					t.Errorf("lines that add up: kubetree %v, want the in-tree plugin's meaning", ourErr)
				}
				return
			}
			want := tc.option + " is given twice, on line 2 and on line 3: give it once"
			if ourErr == nil || !strings.Contains(ourErr.Error(), want) {
				t.Errorf("want an error saying %q, got %v", want, ourErr)
			}
		})
	}
	if !strings.Contains(oneLine(optionsSection(t, "## Options of the in-tree plugin")), repeatRefused) {
		t.Errorf("docs/differences.md's options of the in-tree plugin do not say %q", repeatRefused)
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
	for option := range options {
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
	for _, option := range inTree {
		if _, ok := options[option]; !ok {
			t.Errorf("kubetree's parser has no %q, an option of the in-tree parser", option)
		}
	}
}

// repeatRefused is how docs/differences.md says that kubetree refuses a repeated option.
const repeatRefused = "an option given twice is refused, naming both lines, but for `namespaces`, whose lines add up"

// optionsSection is docs/differences.md's section under heading, to the next heading.
func optionsSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("docs/differences.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), heading+"\n")
	if !ok {
		t.Fatalf("docs/differences.md has no %q section", heading)
	}
	section, _, _ := strings.Cut(after, "\n#")
	return section
}

// oneLine joins wrapped lines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// optionTable is one of docs/differences.md's option tables, under heading: option -> the rest of its row.
func optionTable(t *testing.T, heading string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	for _, line := range strings.Split(optionsSection(t, heading), "\n")[1:] {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(strings.Join(cells[2:len(cells)-1], "|"))
	}
	return rows
}

// TestIsolateOptions: isolate's arguments, and what it needs.
func TestIsolateOptions(t *testing.T) {
	for _, tc := range []struct {
		stanza, err string
		open        []string
		allow       bool
	}{
		{stanza: "pods verified\n\tisolate refuse", open: []string{"default"}},
		{stanza: "pods verified\n\tisolate allow shop Payments", open: []string{"shop", "payments"}, allow: true},
		{stanza: "pods verified\n\tisolate", err: "Wrong argument count"},
		{stanza: "pods verified\n\tisolate deny", err: "isolate takes refuse or allow"},
		{stanza: "pods verified\n\tisolate refuse a.b", err: `isolate: "a.b" is not a namespace name`},
		{stanza: "pods verified\n\tisolate refuse bad_ns! ns1", err: `isolate: "bad_ns!" is not a namespace name: a lowercase RFC 1123 label`},
		{stanza: "pods verified\n\tisolate refuse ns1 ns1", err: "isolate: namespace ns1 is given twice; give it once"},
		{stanza: "pods verified\n\tisolate refuse ns1 NS1", err: "isolate: namespace ns1 is given twice; give it once"},
		{stanza: "isolate refuse", err: "isolate needs pods verified"},
		{stanza: "pods verified\n\tisolate_labels shared=yes", err: "isolate_labels needs isolate"},
		{stanza: "pods verified\n\tisolate refuse\n\tisolate_labels ==", err: "unable to parse isolate_labels selector"},
	} {
		k, err := parse(caddy.NewTestController("dns", "kubetree cluster.local {\n\t"+tc.stanza+"\n}"))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.stanza, err, tc.err)
		case tc.err != "":
		case err != nil:
			t.Errorf("%q: %v", tc.stanza, err)
		case !slices.Equal(k.cfg.isolate.Open, tc.open) || k.cfg.isolate.AllowUnidentified != tc.allow:
			t.Errorf("%q: open %q allow %v, want %q %v", tc.stanza, k.cfg.isolate.Open, k.cfg.isolate.AllowUnidentified, tc.open, tc.allow)
		}
	}
}

// TestMulticlusterParse: the zones must be forward zones of the stanza, as in the in-tree plugin;
// without arguments the option names no zone, as there.
func TestMulticlusterParse(t *testing.T) {
	for _, tc := range []struct {
		stanza string
		zones  []string // want: multicluster zones
		err    string
	}{
		{stanza: "kubetree cluster.local clusterset.local {\n multicluster clusterset.local\n}", zones: []string{"clusterset.local."}},
		{stanza: "kubetree cluster.local {\n multicluster\n}"},
		{stanza: "kubetree cluster.local {\n multicluster clusterset.local\n}", err: "multicluster zone clusterset.local. is not a forward zone"},
		{stanza: "kubetree cluster.local 10.in-addr.arpa {\n multicluster 10.in-addr.arpa\n}", err: "multicluster zone 10.in-addr.arpa. is not a forward zone"},
	} {
		k, err := parse(caddy.NewTestController("dns", tc.stanza))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.stanza, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.stanza, err)
		case fmt.Sprint(k.cfg.multiclusterZones) != fmt.Sprint(tc.zones):
			t.Errorf("%q: multicluster zones %v, want %v", tc.stanza, k.cfg.multiclusterZones, tc.zones)
		}
	}
}

// TestZonalParse: zonal takes no argument, and cannot be had without the endpoints.
func TestZonalParse(t *testing.T) {
	for _, tc := range []struct{ stanza, err string }{
		{stanza: "kubetree cluster.local {\n zonal\n}"},
		{stanza: "kubetree cluster.local {\n zonal yes\n}", err: "Wrong argument count"},
		{stanza: "kubetree cluster.local {\n zonal\n noendpoints\n}", err: "zonal needs the endpoints"},
	} {
		k, err := parse(caddy.NewTestController("dns", tc.stanza))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.stanza, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.stanza, err)
		case !k.cfg.zonal:
			t.Errorf("%q: zonal not set", tc.stanza)
		}
	}
}

// TestServingTerminatingOption: the option takes no argument, and needs the endpoints.
func TestServingTerminatingOption(t *testing.T) {
	for stanza, want := range map[string]string{
		"serving_terminating yes":            "Wrong argument count",
		"noendpoints\n\tserving_terminating": "serving_terminating needs the endpoints",
	} {
		if _, err := parse(caddy.NewTestController("dns", "kubetree cluster.local {\n\t"+stanza+"\n}")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", stanza, err, want)
		}
	}
}
