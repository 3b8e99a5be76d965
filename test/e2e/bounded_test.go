package e2e

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// The deployment's container limit (deploy/deployment.yaml), and the soft limit it gives Go.
const (
	containerLimit = 170 << 20
	goMemLimit     = "150MiB"
)

// TestHugeAnswersStayWithinTheContainer asks, 8 clients at once, for the SRV records of a headless
// service of 5 slices × 1,000 endpoints × 100 named ports (500,000 records, where a reply carries
// a few thousand), through deploy/'s Corefile (`cache 30` in front) with deploy/'s memory
// settings: every reply is cut to its transport with TC set, DNS keeps answering, and the process
// never holds more than the container's limit.
func TestHugeAnswersStayWithinTheContainer(t *testing.T) {
	ns := newNamespace(t, "huge-answers")
	createHugeService(t, ns)
	createService(t, k8stest.HeadlessService(ns, "small", k8stest.TCP("http", 80)))
	applySlice(t, k8stest.Slice(ns, "small", "small-1", discovery.AddressTypeIPv4,
		k8stest.SlicePorts(k8stest.SlicePort("http", api.ProtocolTCP, 80)), k8stest.Endpoint{Addrs: []string{"10.250.9.1"}}))

	t.Setenv("GOMEMLIMIT", goMemLimit)
	c := startShippedCorefileWith(t, env.root+"/bin/coredns", shippedCorefile(t), env.vars["KUBECONFIG"])
	eventually(t, "ready", 30*time.Second, c.isReady)
	hugeName, small := svcName(ns, "huge"), svcName(ns, "small")
	c.waitAnswer(t, "10-254-3-231."+hugeName, dns.TypeA, "10.254.3.231") // the last slice's last endpoint
	c.waitAnswer(t, small, dns.TypeA, "10.250.9.1")
	before := processMemory(t, c)

	const clients, rounds = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, clients*rounds*2)
	for range clients {
		wg.Go(func() {
			for range rounds {
				for _, network := range []string{"udp", "tcp"} {
					if err := askHuge(c, network, hugeName); err != nil {
						errs <- err
					}
				}
			}
		})
	}
	// DNS keeps answering meanwhile.
	unanswered := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
			if m, err := c.try("udp", small, dns.TypeA); err != nil || len(m.Answer) != 1 {
				unanswered++
			}
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if unanswered > 0 {
		t.Errorf("%d queries for a small service went unanswered while the huge one was asked", unanswered)
	}
	after := processMemory(t, c)
	report(t, "SRV at a headless service of 5,000 endpoints × 100 ports, %d clients × %d rounds over UDP and TCP, deploy/'s Corefile: RSS %s before, %s after, peak %s (limit %s)",
		clients, rounds, mib(before.rss), mib(after.rss), mib(after.peak), mib(containerLimit))
	if after.peak >= containerLimit {
		t.Errorf("peak RSS %s, over deploy/'s container limit of %s", mib(after.peak), mib(containerLimit))
	}
}

// createHugeService creates the headless service "huge" of 5 slices × 1,000 endpoints (10.25x.y.z)
// × 100 named ports (p0 to p99) in ns, and returns its slices.
func createHugeService(t testing.TB, ns string) []*discovery.EndpointSlice {
	t.Helper()
	var svcPorts []api.ServicePort
	var slicePorts []discovery.EndpointPort
	for p := range 100 {
		name := fmt.Sprintf("p%d", p)
		svcPorts = append(svcPorts, k8stest.TCP(name, int32(8000+p)))
		slicePorts = append(slicePorts, k8stest.SlicePort(name, api.ProtocolTCP, int32(8000+p)))
	}
	createService(t, k8stest.HeadlessService(ns, "huge", svcPorts...))
	var out []*discovery.EndpointSlice
	for s := range 5 {
		var eps []k8stest.Endpoint
		for e := range 1000 {
			eps = append(eps, k8stest.Endpoint{Addrs: []string{fmt.Sprintf("10.%d.%d.%d", 250+s, e>>8, e&255)}})
		}
		sl := k8stest.Slice(ns, "huge", fmt.Sprintf("huge-%d", s), discovery.AddressTypeIPv4, slicePorts, eps...)
		applySlice(t, sl)
		out = append(out, sl)
	}
	return out
}

// TestHugeServiceChurnDelaysNoOther changes one endpoint of a headless service of 5,000 endpoints ×
// 100 named ports as fast as the API server takes it, with the transfer plugin (whose journal records each change
// for IXFR), while new services are created one after another: each is answered, and the time
// from its creation to its first answer is reported beside the applier's time per change. The
// huge service's last change is served, and an IXFR from before the churn is the net change.
func TestHugeServiceChurnDelaysNoOther(t *testing.T) {
	ns := newNamespace(t, "huge-churn")
	huge := createHugeService(t, ns)
	t.Setenv("KUBETREE_COREDNS", env.root+"/bin/coredns") // figures of the build users run
	c := startCoreDNSWith(t, []string{"transfer {\n        to *\n    }"})
	eventually(t, "ready", 30*time.Second, c.isReady)
	hugeName := svcName(ns, "huge")
	c.waitAnswer(t, "10-254-3-231."+hugeName, dns.TypeA, "10.254.3.231")
	serialBefore := c.query(t, "udp", "cluster.local.", dns.TypeSOA).Answer[0].(*dns.SOA).Serial
	applyBefore, appliedBefore := probeMetric(c.scrape(), "coredns_kubetree_apply_duration_seconds_sum", ""), probeMetric(c.scrape(), "coredns_kubetree_apply_duration_seconds_count", "")

	churned, err := env.client.DiscoveryV1().EndpointSlices(ns).Get(bg, huge[3].Name, meta.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	churnStart := time.Now()
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		changes := 0
		defer func() { done <- changes }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			churned.Endpoints[42].Addresses = []string{fmt.Sprintf("10.249.0.%d", changes%200+1)}
			out, err := env.client.DiscoveryV1().EndpointSlices(ns).Update(bg, churned, meta.UpdateOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			churned.ResourceVersion = out.ResourceVersion
			changes++
		}
	}()
	var delays []time.Duration
	for i := range 10 {
		created := createService(t, k8stest.ClusterIPService(ns, fmt.Sprintf("new-%d", i), nil, k8stest.TCP("http", 80)))
		start := time.Now()
		name := svcName(ns, created.Name)
		eventually(t, name+" answered", 30*time.Second, func() bool {
			m, err := c.try("udp", name, dns.TypeA)
			return err == nil && len(m.Answer) == 1
		})
		delays = append(delays, time.Since(start))
		time.Sleep(500 * time.Millisecond)
	}
	close(stop)
	changes := <-done
	applyAfter, appliedAfter := probeMetric(c.scrape(), "coredns_kubetree_apply_duration_seconds_sum", ""), probeMetric(c.scrape(), "coredns_kubetree_apply_duration_seconds_count", "")
	last := fmt.Sprintf("10.249.0.%d", (changes-1)%200+1)
	c.waitAnswer(t, strings.ReplaceAll(last, ".", "-")+"."+hugeName, dns.TypeA, last)

	// IXFR from before the churn: the net change, the churned endpoint's first address gone and
	// its last come, and the new services.
	time.Sleep(time.Second) // the serial moves at most once a second
	rrs, _ := c.transferIn(t, "cluster.local.", serialBefore)
	if len(rrs) < 2 || rrs[1].Header().Rrtype != dns.TypeSOA || rrs[1].(*dns.SOA).Serial != serialBefore {
		t.Fatalf("IXFR from %d is not incremental: %d records, starting %v", serialBefore, len(rrs), rrs[:min(len(rrs), 2)])
	}
	var deleted, added []string
	section := &deleted
	for _, rr := range rrs[2 : len(rrs)-1] {
		if rr.Header().Rrtype == dns.TypeSOA {
			section = &added
			continue
		}
		*section = append(*section, strings.Join(strings.Fields(rr.String()), " "))
	}
	for _, want := range []struct {
		section []string
		rr      string
	}{
		{deleted, hugeName + " 5 IN A " + huge[3].Endpoints[42].Addresses[0]},
		{deleted, "10-253-0-42." + hugeName + " 5 IN A 10.253.0.42"},
		{added, hugeName + " 5 IN A " + last},
		{added, strings.ReplaceAll(last, ".", "-") + "." + hugeName + " 5 IN A " + last},
	} {
		if !slices.Contains(want.section, want.rr) {
			t.Errorf("IXFR from before the churn lacks %q\ndeleted %d records, added %d: %q ... %q", want.rr, len(deleted), len(added), deleted[:min(len(deleted), 5)], added[:min(len(added), 5)])
		}
	}
	slices.Sort(delays)
	report(t, "with transfer, a headless service of 5,000 endpoints × 100 ports changed %d times in %s: new services answered %s (median) and at most %s after creation; the applier's time over the churn %s, %s a change (mean)",
		changes, time.Since(churnStart).Round(100*time.Millisecond), delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond),
		time.Duration((applyAfter-applyBefore)*float64(time.Second)).Round(time.Millisecond),
		time.Duration((applyAfter-applyBefore)/max(appliedAfter-appliedBefore, 1)*float64(time.Second)).Round(10*time.Microsecond))
}

// askHuge asks for the huge service's SRV records over network, as a client with a 1,232-byte
// buffer does over UDP: the reply must be cut to what the transport carries, with TC set.
func askHuge(c *coreDNS, network, name string) error {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeSRV)
	m.SetEdns0(1232, false)
	client := &dns.Client{Net: network, Timeout: 30 * time.Second}
	r, _, err := client.Exchange(m, c.addr)
	if err != nil {
		return fmt.Errorf("SRV %s over %s: %v", name, network, err)
	}
	size := 1232
	if network == "tcp" {
		size = dns.MaxMsgSize
	}
	r.Compress = true // as the server packed it
	switch packed, err := r.Pack(); {
	case err != nil:
		return fmt.Errorf("SRV %s over %s: %v", name, network, err)
	case r.Rcode != dns.RcodeSuccess || !r.Truncated || len(r.Answer) == 0:
		return fmt.Errorf("SRV %s over %s: %s, TC %v, %d records; want NOERROR, TC and what fits", name, network, dns.RcodeToString[r.Rcode], r.Truncated, len(r.Answer))
	case len(packed) > size:
		return fmt.Errorf("SRV %s over %s: a reply of %d bytes, over %d", name, network, len(packed), size)
	}
	return nil
}

// shippedCorefile is deploy/'s Corefile, as its ConfigMap holds it.
func shippedCorefile(t *testing.T) string {
	t.Helper()
	var cm api.ConfigMap
	decodeManifest(t, "deploy/configmap.yaml", &cm)
	return cm.Data["Corefile"]
}

// memory is a process's resident memory now and at its peak (VmRSS and VmHWM).
type memory struct{ rss, peak int64 }

func processMemory(t testing.TB, c *coreDNS) memory {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var m memory
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.peak = kb << 10
		}
	}
	return m
}

// TestDumpAttackStaysBounded runs the /dump attack against a cluster with a headless service of
// 5,000 endpoints × 100 named ports: 100 clients that ask for the whole dump and never read, and
// 2,000 idle connections, with deploy/'s memory settings. DNS keeps answering, the process stays
// within the container's limit, and the listener's goroutines stay bounded.
func TestDumpAttackStaysBounded(t *testing.T) {
	ns := newNamespace(t, "dump-attack")
	createHugeService(t, ns)
	addr := freePorts(t, 1)[0]
	t.Setenv("KUBETREE_COREDNS", env.root+"/bin/coredns") // figures of the build users run
	t.Setenv("GOMEMLIMIT", goMemLimit)
	c := startCoreDNSWith(t, []string{"cache 30"}, "explain "+addr)
	eventually(t, "ready", 30*time.Second, c.isReady)
	hugeName := svcName(ns, "huge")
	c.waitAnswer(t, "10-254-3-231."+hugeName, dns.TypeA, "10.254.3.231")
	goroutines, _ := metricValue(c, "go_goroutines")

	var conns []net.Conn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for range 100 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET /dump HTTP/1.1\r\nHost: explain\r\n\r\n") // and never read
		conns = append(conns, conn)
	}
	for range 2000 {
		if conn, err := net.Dial("tcp", addr); err == nil { // idle: the listener may refuse past its cap
			conns = append(conns, conn)
		}
	}
	unanswered := 0
	for range 100 { // 10 s of DNS, while the attack holds
		if m, err := c.try("udp", "10-254-3-231."+hugeName, dns.TypeA); err != nil || len(m.Answer) != 1 {
			unanswered++
		}
		time.Sleep(100 * time.Millisecond)
	}
	during, _ := metricValue(c, "go_goroutines")
	mem := processMemory(t, c)
	report(t, "/dump attack (100 clients that never read, 2,000 idle connections) on 5,000 endpoints × 100 ports: peak RSS %s (limit %s), goroutines %.0f before and %.0f during, %d of 100 DNS queries unanswered",
		mib(mem.peak), mib(containerLimit), goroutines, during, unanswered)
	if unanswered > 0 {
		t.Errorf("%d of 100 DNS queries went unanswered during the attack", unanswered)
	}
	if mem.peak >= containerLimit {
		t.Errorf("peak RSS %s, over deploy/'s container limit of %s", mib(mem.peak), mib(containerLimit))
	}
	if during > goroutines+200 {
		t.Errorf("goroutines %.0f during the attack, %.0f before: the listener does not bound them", during, goroutines)
	}
}
