package kubetree

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

func TestSmoke(t *testing.T) {
	c := newCluster(t, "kubetree cluster.local 10.in-addr.arpa", namespace("prod"),
		clusterIPService("prod", "web", []string{"10.96.0.10", "fd00::10"}, tcp("http", 80)))
	for _, q := range []struct {
		name string
		qt   uint16
	}{
		{"web.prod.svc.cluster.local.", dns.TypeA}, {"WEB.prod.svc.cluster.local.", dns.TypeAAAA},
		{"_http._tcp.web.prod.svc.cluster.local.", dns.TypeSRV}, {"10.0.96.10.in-addr.arpa.", dns.TypePTR},
		{"nope.prod.svc.cluster.local.", dns.TypeA}, {"prod.svc.cluster.local.", dns.TypeA},
	} {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qt)
		c.k.ServeDNS(context.Background(), rec, m)
		t.Log(rec.Msg)
	}
}
