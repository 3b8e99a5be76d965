package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/kubetree/kubetree/internal/k8stest"
)

// TestReloadLeaksNothing: each Corefile reload (the reload plugin) stops the old instance's
// informers, self-probe and connections to the API server, and hands its explain listener to the
// new instance, so after several reloads exactly one instance's watches, connection, probe and
// explain listener run (the explain endpoint
// answering with the new instance's ttl); queries keep being answered through the reloads, and
// never wrongly.
func TestReloadLeaksNothing(t *testing.T) {
	ns := newNamespace(t, "reload")
	createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	explain := freePorts(t, 1)[0]
	c := startCoreDNSWith(t, []string{"reload 2s 1s"}, "ttl 5", "probe "+svcName(ns, "web")+" 1s", "explain "+explain)
	eventually(t, "ready", 30*time.Second, c.isReady)
	c.waitRcode(t, svcName(ns, "web"), dns.TypeA, dns.RcodeSuccess)
	one := c.watchGoroutines(t)
	if one.reflectors == 0 || one.probes != 1 || one.explainListeners != 1 || one.apiConnections == 0 {
		t.Fatalf("%s in the goroutine dump; want reflectors, one probe, one explain listener and a connection", one)
	}

	p := probe(c, []string{svcName(ns, "web")})
	for ttl := 6; ttl <= 8; ttl++ {
		c.rewrite(t, "ttl "+itoa(ttl-1), "ttl "+itoa(ttl))
		eventually(t, "reload with ttl "+itoa(ttl), 30*time.Second, func() bool {
			m, err := c.try("udp", svcName(ns, "web"), dns.TypeA)
			return err == nil && len(m.Answer) == 1 && m.Answer[0].Header().Ttl == uint32(ttl)
		})
		// The explain listener was handed to the new instance, which answers with the new ttl.
		eventually(t, "explain answered by the instance with ttl "+itoa(ttl), 30*time.Second, func() bool {
			x := explainOver(t, "http://"+explain, svcName(ns, "web"), dns.TypeA)
			return len(x.Answer) == 1 && strings.Fields(x.Answer[0])[1] == itoa(ttl)
		})
	}
	var after goroutines
	eventually(t, "old instances' informers and connections stopped", 30*time.Second, func() bool {
		http.DefaultClient.CloseIdleConnections() // the explain requests' connections: not the server's to count
		after = c.watchGoroutines(t)
		return after.reflectors == one.reflectors && after.workers == one.workers && after.probes == one.probes &&
			after.explainListeners == one.explainListeners && after.apiConnections == one.apiConnections
	}, func() string { return "before: " + one.String() + "; after: " + after.String() })
	p.finish()
	report(t, "after 3 reloads: %s (one instance: %s); queries during the reloads: %s", after, one, p)
	// A reload rebinds the listeners: a query in flight at that instant may go unanswered, and
	// that is the reload itself. A wrong answer never is.
	if p.nxdomain.Load() != 0 || p.servfail.Load() != 0 {
		t.Errorf("queries during the reloads: %s; none may be NXDOMAIN or SERVFAIL", p)
	}
	if p.answered.Load() == 0 {
		t.Error("no query was answered during the reloads")
	}
}

type goroutines struct {
	total, reflectors, workers, probes, explainListeners, apiConnections int
	// pprofListeners are CoreDNS's pprof plugin's listeners: it starts one in each instance's
	// OnStartup and stops none of a reload that fails, which is that plugin's to mend, not kubetree's.
	pprofListeners int
}

func (g goroutines) String() string {
	return "goroutines " + itoa(g.total) + ", reflectors " + itoa(g.reflectors) + ", kubetree workers " + itoa(g.workers) +
		", probes " + itoa(g.probes) + ", explain listeners " + itoa(g.explainListeners) +
		", API server connections " + itoa(g.apiConnections)
}

// watchGoroutines counts goroutines in the pprof dump: all of them, client-go reflectors,
// kubetree's queue workers, its self-probes, its explain listeners and the read loops of its
// connections to the API server (HTTP/2, or HTTP/1.1 where the server offers no HTTP/2).
func (c *coreDNS) watchGoroutines(t *testing.T) goroutines {
	t.Helper()
	resp, err := http.Get("http://" + c.pprof + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var g goroutines
	for _, stack := range strings.Split(string(body), "\n\n") {
		if !strings.HasPrefix(stack, "goroutine ") {
			continue
		}
		g.total++
		if strings.Contains(stack, "(*Reflector).ListAndWatch") {
			g.reflectors++
		}
		if strings.Contains(stack, "kubetree/internal/watcher.(*Watcher).work") {
			g.workers++
		}
		if strings.Contains(stack, "kubetree/internal/probe.(*Prober).Start") {
			g.probes++
		}
		if strings.Contains(stack, "kubetree/internal/explain.Start") && strings.Contains(stack, "(*Server).Serve(") {
			g.explainListeners++
		}
		if strings.Contains(stack, "plugin/pprof.(*handler).Startup") && strings.Contains(stack, "(*Server).Serve(") {
			g.pprofListeners++
		}
		if strings.Contains(stack, "ClientConn).readLoop(") || strings.Contains(stack, "persistConn).readLoop(") {
			g.apiConnections++
		}
	}
	return g
}

// rewrite edits the Corefile in place; the reload plugin notices within its interval.
func (c *coreDNS) rewrite(t *testing.T, old, new string) {
	t.Helper()
	raw, err := os.ReadFile(c.corefile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), old) {
		t.Fatalf("Corefile has no %q", old)
	}
	if err := os.WriteFile(c.corefile, []byte(strings.Replace(string(raw), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFailedReloadLeaksNothing: a reload to a Corefile that cannot start (its explain address is
// taken) fails, the instance before it goes on serving, and the failed instance leaves nothing
// running: after 10 failed reloads, the goroutines (informers, workers, probes, explain listeners,
// API connections), the open files and kubetree's metric series are what they were, and the
// explain endpoint is still the serving instance's. (CoreDNS's own pprof plugin keeps a listener of
// each failed reload, a goroutine and a socket each: those are counted and taken off.)
func TestFailedReloadLeaksNothing(t *testing.T) {
	ns := newNamespace(t, "failedreload")
	createService(t, k8stest.ClusterIPService(ns, "web", nil, k8stest.TCP("http", 80)))
	ports := freePorts(t, 2)
	explain, taken := ports[0], ports[1]
	busy, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	c := startCoreDNSWith(t, []string{"reload 2s 1s"}, "ttl 5", "probe "+svcName(ns, "web")+" 1s", "explain "+explain)
	eventually(t, "ready", 30*time.Second, c.isReady)
	c.waitRcode(t, svcName(ns, "web"), dns.TypeA, dns.RcodeSuccess)
	before, files, series := c.watchGoroutines(t), c.openFiles(t), c.kubetreeSeries()
	if before.reflectors == 0 || before.probes != 1 || before.explainListeners != 1 {
		t.Fatalf("%s in the goroutine dump; want reflectors, one probe and one explain listener", before)
	}

	// Each failing Corefile differs from the last (its ttl), so that the reload plugin tries it.
	c.rewrite(t, "explain "+explain, "explain "+taken)
	for i := range 10 {
		c.rewrite(t, "ttl "+itoa(5+i), "ttl "+itoa(6+i))
		eventually(t, "failed reload "+itoa(i+1), 30*time.Second, func() bool {
			return strings.Count(c.out.String(), "reload failed") >= i+1
		})
		m := c.query(t, "udp", svcName(ns, "web"), dns.TypeA)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 5 {
			t.Fatalf("after failed reload %d: %v; want the serving instance's answer, ttl 5", i+1, m)
		}
	}
	var after goroutines
	var filesAfter int
	var seriesAfter string
	eventually(t, "the failed instances stopped", 30*time.Second, func() bool {
		http.DefaultClient.CloseIdleConnections()
		after, filesAfter, seriesAfter = c.watchGoroutines(t), c.openFiles(t), c.kubetreeSeries()
		return after.reflectors == before.reflectors && after.workers == before.workers && after.probes == before.probes &&
			after.explainListeners == before.explainListeners && after.apiConnections == before.apiConnections &&
			filesAfter-after.pprofListeners <= files-before.pprofListeners && seriesAfter == series
	}, func() string {
		return "before: " + before.String() + ", open files " + itoa(files) + "; after: " + after.String() + ", open files " + itoa(filesAfter) +
			"\nseries before:\n" + series + "\nseries after:\n" + seriesAfter
	})
	if x := explainOver(t, "http://"+explain, svcName(ns, "web"), dns.TypeA); len(x.Answer) != 1 || strings.Fields(x.Answer[0])[1] != "5" {
		t.Errorf("explain answered %v; want the serving instance's answer, ttl 5", x.Answer)
	}
	report(t, "after 10 failed reloads: %s, open files %d, pprof's listeners %d (before: %s, %d, %d)", after, filesAfter,
		after.pprofListeners, before, files, before.pprofListeners)
}

// openFiles counts CoreDNS's open file descriptors: sockets to the API server among them.
func (c *coreDNS) openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + itoa(c.cmd.Process.Pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// kubetreeSeries are the names and labels of kubetree's metric series (not their values), sorted.
func (c *coreDNS) kubetreeSeries() string {
	var out []string
	for _, line := range strings.Split(c.scrape(), "\n") {
		if strings.HasPrefix(line, "coredns_kubetree_") {
			series, _, _ := strings.Cut(line, " ")
			out = append(out, series)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
