package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// -watch-cost: what one plain EndpointSlice watch costs the API server per event it carries,
// and what kubetree's audit costs it, in one run.
//
// -steady measures a replica of each plugin against the API server's own variation, and one
// replica's watch did not come out above it (STEADY.md, STEADY-FANOUT.md). Here the watchers are
// the bench's own: -watch-cost raw watches of every EndpointSlice, each on a TLS connection of its
// own (as each replica has), protobuf, from the current version (as a reflector watches after its
// list: plain, the API server compresses only a streamed list's watch), the bytes read and dropped.
// The API server does for each what it does for a replica's EndpointSlice watch (which carries
// every slice update; its other watches carry none of them), and its cost per event multiplies by
// -watch-cost: in rounds, a window with the watches over HTTP/2 (the in-tree plugin's), one over
// HTTP/1.1 (kubetree's while busy) and one without, under the same churn (-steady-rate), CPU as
// -steady counts it. A watch costs its window's CPU per update less the no-watch window's, over
// the watches. Then kubetree's audit under the same churn, as -steady measures it, and the two
// per replica-hour at each audit interval.

// watchCostResult is the whole run.
type watchCostResult struct {
	cluster      *cluster
	machine      machine
	version      string
	began, ended time.Time
	watchers     int
	windows      map[string][]steadyWindow // by watchVariants' name, "" for none; one per round
	audit        *auditRun                 // kubetree's (bin/coredns), under the same churn
	scrapeAlloc  float64                   // what one scrape of the API server's metrics allocates
	gcCPU        float64                   // the API server's collector over the run, its CPU seconds
	gcAlloc      float64                   // and what was allocated meanwhile
}

// watchVariants are the watches measured: HTTP/2, as the in-tree plugin's (and kubetree's while
// quiet), and HTTP/1.1, as kubetree's while busy (watchstream.go: 50 events within 5 s).
var watchVariants = []watchVariant{{"HTTP/2", false}, {"HTTP/1.1", true}}

// watchVariant is one kind of watch measured; "" is none.
type watchVariant struct {
	name  string
	http1 bool
}

func runWatchCost(ctx context.Context, cfg *config) error {
	began := time.Now()
	return withControlPlane(ctx, cfg, "kubetree-bench-watchcost-", func(dir string, cp *controlPlane) error {
		res := &watchCostResult{machine: machineInfo(cfg.root), version: cp.version, began: began, watchers: cfg.watchCost,
			windows: map[string][]steadyWindow{}}
		logf("== create the cluster")
		cl, err := populate(ctx, cp, cfg, nil)
		if err != nil {
			return err
		}
		res.cluster = cl
		target, pids, err := cp.processes()
		if err != nil {
			return err
		}
		writer, err := protobufClient(cp.kubeconfig)
		if err != nil {
			return err
		}
		ch, stopChurn := startChurn(ctx, cl, writer, cfg.steadyRate)
		defer stopChurn()
		if err := sleep(ctx, cfg.steadySettle); err != nil {
			return err
		}
		first, scrape, err := cp.scrapeCost(ctx)
		if err != nil {
			return err
		}
		res.scrapeAlloc = scrape
		for round := range cfg.steadyRounds {
			for _, v := range watchVariants {
				w, err := watchersWindow(ctx, cfg, dir, cp, target, pids, ch, cfg.watchCost, v.http1, round)
				if err != nil {
					return fmt.Errorf("round %d, %d watchers over %s: %w", round+1, cfg.watchCost, v.name, err)
				}
				res.windows[v.name] = append(res.windows[v.name], w)
			}
			w, err := watchersWindow(ctx, cfg, dir, cp, target, pids, ch, 0, false, round)
			if err != nil {
				return fmt.Errorf("round %d, no watchers: %w", round+1, err)
			}
			res.windows[""] = append(res.windows[""], w)
		}
		if cfg.audits > 0 {
			// kubetree's audit under the same churn, as -steady measures it. Between audits the
			// API server allocates at the churn's rate: the lowest of the windows without watches
			// (a window may also hold the API server's own periodic work, which allocates as
			// much again; taking it off the audit would understate what the audit allocates).
			coreDNSBinary = filepath.Join(cfg.root, "bin/coredns")
			rest := inTreeRun{scrapeAlloc: res.scrapeAlloc, apiAlloc: res.churnAlloc()}
			if res.audit, err = measureServer(ctx, cfg, dir, cp, target, pids, cl.probe(), "kubetree", coreDNSBinary, rest); err != nil {
				return fmt.Errorf("kubetree's audit: %w", err)
			}
		}
		last, err := cp.apiMetrics(ctx)
		if err != nil {
			return err
		}
		res.gcCPU, res.gcAlloc = last.gcCPU-first.gcCPU, last.alloc-first.alloc
		res.ended = time.Now()
		return publish(cfg, res.markdown(cfg))
	})
}

// watchersWindow opens n watches (none: 0), over HTTP/1.1 or HTTP/2, waits -steady-settle, and
// measures one window.
func watchersWindow(ctx context.Context, cfg *config, dir string, cp *controlPlane, target string, pids map[string]int,
	ch *steadyChurn, n int, http1 bool, round int) (steadyWindow, error) {
	w := steadyWindow{round: round, replicas: n}
	ctx, cancel := context.WithCancel(ctx)
	var readers sync.WaitGroup
	var proxies []*countingProxy
	defer func() {
		cancel()
		readers.Wait()
		for _, p := range proxies {
			p.close()
		}
	}()
	if n > 0 {
		list, err := cp.client.DiscoveryV1().EndpointSlices("").List(ctx, meta.ListOptions{Limit: 1})
		if err != nil {
			return w, err
		}
		from := list.ResourceVersion
		for i := range n {
			p, kc, err := proxied(dir, fmt.Sprintf("watcher-%d-%d", round, i), cp.kubeconfig, target)
			if err != nil {
				return w, err
			}
			proxies = append(proxies, p)
			body, err := openSliceWatch(ctx, kc, from, http1)
			if err != nil {
				return w, fmt.Errorf("watcher %d: %w", i, err)
			}
			readers.Go(func() {
				defer body.Close()
				io.Copy(io.Discard, body)
			})
		}
	}
	if err := sleep(ctx, cfg.steadySettle); err != nil {
		return w, err
	}
	carried := func() (cpu, down, up float64, err error) {
		for _, p := range proxies {
			down += float64(p.down.Load())
			up += float64(p.up.Load())
		}
		return 0, down, up, nil
	}
	proto := map[bool]string{false: "HTTP/2", true: "HTTP/1.1"}[http1]
	err := measureWindow(ctx, cfg.steadyWindow, cp, pids, ch, &w, carried, fmt.Sprintf("round %d, %d watchers over %s", round+1, n, proto))
	return w, err
}

// openSliceWatch opens a watch of every EndpointSlice from version through kubeconfig, on a
// connection of its own (HTTP/1.1 or HTTP/2), as a reflector's after its list: protobuf, plain.
func openSliceWatch(ctx context.Context, kubeconfig, version string, http1 bool) (io.ReadCloser, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if http1 {
		rc.NextProtos = []string{"http/1.1"}
	}
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(rc.Host, "/") + "/apis/discovery.k8s.io/v1/endpointslices?watch=true&allowWatchBookmarks=true&resourceVersion=" + version
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf") // as client-go asks
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if want := map[bool]int{false: 2, true: 1}[http1]; resp.ProtoMajor != want {
		resp.Body.Close()
		return nil, fmt.Errorf("the watch came over %s, want HTTP/%d", resp.Proto, want)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" || resp.Uncompressed {
		resp.Body.Close()
		return nil, fmt.Errorf("the watch came compressed (%q), want it plain", enc)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") {
		resp.Body.Close()
		return nil, fmt.Errorf("the watch came as %q, want protobuf", ct)
	}
	return resp.Body, nil
}

// churnAlloc is what the API server allocates a second under the churn alone: the lowest rate of
// the windows without watches.
func (res *watchCostResult) churnAlloc() float64 {
	low := 0.0
	for i, w := range res.windows[""] {
		if r := (w.alloc - res.scrapeAlloc) / w.secs; i == 0 || r < low {
			low = r
		}
	}
	return low
}

func (res *watchCostResult) gcPerByte() float64 {
	if res.gcAlloc <= 0 {
		return 0
	}
	return res.gcCPU / res.gcAlloc
}

// perEvent is the API server's CPU per event and watch of variant in each round: the window's
// CPU per update less the no-watcher window's, over the watches; charged says with the collector
// charged by allocation (and the busiest seconds out), else as measured.
func (res *watchCostResult) perEvent(variant string, charged bool) []float64 {
	gcb := res.gcPerByte()
	none := res.windows[""]
	var out []float64
	for i, w := range res.windows[variant] {
		if i >= len(none) || w.updates == 0 || none[i].updates == 0 {
			continue
		}
		n := none[i]
		a, b := w.apiCPU, n.apiCPU
		if charged {
			a, b = w.charged(gcb), n.charged(gcb)
		}
		out = append(out, (a/float64(w.updates)-b/float64(n.updates))/float64(w.replicas))
	}
	return out
}

// bytesPerEvent is what the API server sent per event and watch of variant (the median of rounds).
func (res *watchCostResult) bytesPerEvent(variant string) float64 {
	var v []float64
	for _, w := range res.windows[variant] {
		if w.updates > 0 {
			v = append(v, w.down/float64(w.updates)/float64(w.replicas))
		}
	}
	return median(v)
}

// hourly is a replica's API server bytes and CPU (charged) an hour at rate updates a second: the
// in-tree plugin's EndpointSlice watch over HTTP/2, or kubetree's (the dearer of its two
// protocols) with an audit every iv (0: none).
func (res *watchCostResult) hourly(kubetree bool, rate float64, iv time.Duration) (bytes, cpu float64) {
	events := rate * 3600
	bytes, cpu = res.bytesPerEvent("HTTP/2")*events, median(res.perEvent("HTTP/2", true))*events
	if !kubetree {
		return bytes, cpu
	}
	for _, v := range watchVariants {
		bytes = max(bytes, res.bytesPerEvent(v.name)*events)
		cpu = max(cpu, median(res.perEvent(v.name, true))*events)
	}
	if a := res.audit; a != nil && iv > 0 {
		k := 3600 / iv.Seconds()
		bytes += a.median(func(w auditWindow) float64 { return w.down }) * k
		cpu += a.apiCPU(res.gcPerByte()) * k
	}
	return bytes, cpu
}

func (res *watchCostResult) markdown(cfg *config) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m, cl := res.machine, res.cluster
	p("# What a plain EndpointSlice watch and kubetree's audit cost the API server\n\n")
	p("Written by `bench/` (see README.md, `-watch-cost`); committed output of one run.\n\n")
	p("- command: `cd bench && go run . -watch-cost %d -services %d -endpoints %d -headless %.2f -steady-rate %d -steady-window %s -steady-rounds %d -audits %d -audit-interval %s`\n",
		res.watchers, cfg.services, cfg.endpoints, cfg.headless, cfg.steadyRate, cfg.steadyWindow, cfg.steadyRounds, cfg.audits, cfg.auditInterval)
	p("- date: %s (run took %s)\n", res.began.UTC().Format("2006-01-02 15:04 MST"), res.ended.Sub(res.began).Round(time.Second))
	p("- machine: %d CPUs (`nproc`), %s, %s memory, Linux %s, shared with other work; load average at the start %s, at the end %s\n",
		m.nproc, m.cpu, m.memory, m.kernel, m.loadStart, loadavg())
	p("- versions: kube-apiserver %s (etcd and kube-apiserver from `make control-plane`); kubetree (its audit): bin/coredns, %s\n", res.version, m.source)
	p("- cluster: %d namespaces, %d services (%d headless), each with one EndpointSlice of %d endpoints as the EndpointSlice controller writes them: %d endpoints\n",
		len(cl.namespaces), len(cl.services), cl.headless, cl.endpoints, len(cl.services)*cl.endpoints)
	p("- churn: %d EndpointSlice updates a second throughout, each one endpoint of one slice as `-steady` writes it\n\n", cfg.steadyRate)

	p("## A watch's cost per event\n\n")
	p("%d watches of every EndpointSlice, each on a TLS connection of its own through a proxy that counts its bytes, protobuf, plain, from the version current when they open (as a reflector's after its list), their events read and dropped: over HTTP/2 (the in-tree plugin's, and kubetree's while quiet), then over HTTP/1.1 (kubetree's while busy), then none; in each of %d rounds, each window %s from %s after the watches opened. CPU is the API server's utime+stime from /proc; \"charged\" is -steady's count (its busiest %.0f%% of seconds at the mean of the others, its collector charged by what the window allocated, at %.2f s per GB, its runtime's count over the run).\n\n",
		res.watchers, cfg.steadyRounds, cfg.steadyWindow, cfg.steadySettle, steadyTrim*100, res.gcPerByte()*1e9)
	p("| round | watches | updates/s | bytes/s sent | API server CPU s/s | charged | allocated/s |\n| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
	gcb := res.gcPerByte()
	for round := range cfg.steadyRounds {
		for _, v := range append(slices.Clone(watchVariants), watchVariant{}) {
			ws := res.windows[v.name]
			if round >= len(ws) {
				continue
			}
			w := ws[round]
			label := "none"
			if v.name != "" {
				label = fmt.Sprintf("%d over %s", w.replicas, v.name)
			}
			p("| %d | %s | %.2f | %s | %.4f | %.4f | %s |\n", round+1, label, float64(w.updates)/w.secs, human(w.down/w.secs),
				w.apiCPU/w.secs, w.charged(gcb)/w.secs, human(w.alloc/w.secs))
		}
	}
	us := func(v []float64) string {
		var s []string
		for _, x := range v {
			s = append(s, fmt.Sprintf("%.1f", x*1e6))
		}
		return strings.Join(s, ", ")
	}
	p("\n| per event and watch | API server CPU, as measured | each round | charged | each round | bytes sent |\n| --- | ---: | --- | ---: | --- | ---: |\n")
	for _, v := range watchVariants {
		measured, charged := res.perEvent(v.name, false), res.perEvent(v.name, true)
		p("| %s | **%.1f µs** | %s | %.1f µs | %s | %s |\n", v.name, median(measured)*1e6, us(measured), median(charged)*1e6, us(charged), human(res.bytesPerEvent(v.name)))
	}
	p("\n")

	a := res.audit
	if a == nil {
		return b.String()
	}
	p("## kubetree's audit under the same churn\n\n")
	p("kubetree (bin/coredns) with `audit_interval %s`: its first audit not counted, the next %d measured as `-audit` measures them (AUDIT.md): bytes through the proxy and the API server's CPU in each audit's window (%s before it to %s after it), less the rates between audits, the median; its allocations per audit, less the churn's (%s/s, the lowest of the windows without watches), charged at the collector's rate above.\n\n",
		cfg.auditInterval, cfg.audits, auditLead, auditTail, human(res.churnAlloc()))
	p("| per audit | bytes sent by the API server | API server CPU in the window | heap allocated | CPU with the collector's share | duration |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	p("| kubetree | %s | %.3f s | %s | %.3f s | %.3f s |\n\n", human(a.median(func(w auditWindow) float64 { return w.down })),
		a.median(func(w auditWindow) float64 { return w.apiCPU }), human(a.alloc), a.apiCPU(gcb), a.median(func(w auditWindow) float64 { return w.took.Seconds() }))
	if len(a.other) > 0 {
		p("Audits that did not find the cluster in step: %q\n\n", a.other)
	}

	rate := float64(cfg.steadyRate)
	baseBytes, baseCPU := res.hourly(false, rate, 0)
	p("## Per replica-hour\n\n")
	p("At %d EndpointSlice updates a second, an in-tree replica's EndpointSlice watch (HTTP/2) costs the API server %s and %.1f s of CPU (charged) an hour; its other watches carry none of these updates. A kubetree replica's: its watch over the dearer of the two protocols, and its audits, 3600/interval an hour. The goal: at most %.2f× in both.\n\n",
		cfg.steadyRate, human(baseBytes), baseCPU, steadyGoal)
	p("| audit interval | bytes / replica-hour | / in-tree | API server CPU / replica-hour | / in-tree | both ≤ %.2f× |\n| ---: | ---: | ---: | ---: | ---: | :---: |\n", steadyGoal)
	shortest := time.Duration(0)
	for _, iv := range append([]time.Duration{0}, steadyIntervals...) {
		bytes, cpu := res.hourly(true, rate, iv)
		ok := bytes <= steadyGoal*baseBytes && cpu <= steadyGoal*baseCPU
		if ok && iv > 0 && shortest == 0 {
			shortest = iv
		}
		ivs := "no audit"
		if iv > 0 {
			ivs = shortDuration(iv)
		}
		p("| %s | %s | %s | %.2f s | %s | %s |\n", ivs, human(bytes), ratio(bytes, baseBytes), cpu, ratio(cpu, baseCPU), map[bool]string{true: "yes", false: "no"}[ok])
	}
	if shortest > 0 {
		p("\nThe shortest interval of %s that meets the goal in both bytes and CPU: **%s**.\n\n", intervalList(), shortDuration(shortest))
	} else {
		p("\nNo interval of %s meets the goal in both bytes and CPU.\n\n", intervalList())
	}
	return b.String()
}
