package kubetree

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/kubetree/kubetree/internal/probe"
	"github.com/kubetree/kubetree/internal/query"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestSetup checks what parse cannot: errors are wrapped with the plugin's name, and a good stanza
// adds the plugin to the server without starting anything.
func TestSetup(t *testing.T) {
	c := caddy.NewTestController("dns", "kubetree 10.0.0.0/8")
	if err := setup(c); err == nil || !strings.HasPrefix(err.Error(), "plugin/kubetree: ") {
		t.Errorf("want a parse error prefixed plugin/kubetree, got %v", err)
	}

	c = caddy.NewTestController("dns", "kubetree cluster.local {\n\tkubeconfig /nonexistent/kube.conf\n}")
	if err := setup(c); err == nil || !strings.HasPrefix(err.Error(), "plugin/kubetree: ") {
		t.Errorf("want a client error prefixed plugin/kubetree, got %v", err)
	}

	c = caddy.NewTestController("dns", "kubetree cluster.local {\n\tendpoint http://127.0.0.1:1\n}")
	if err := setup(c); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if n := len(dnsserver.GetConfig(c).Plugin); n != 1 {
		t.Errorf("%d plugins added, want 1", n)
	}
}
