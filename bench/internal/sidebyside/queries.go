package sidebyside

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"

	"github.com/miekg/dns"
)

// A query kind of the load mix.
type qkind struct {
	name   string
	share  float64
	rcode  string // what both plugins should answer
	miss   bool   // one of the 30% that find nothing
	source string // how the name is made
}

// serviceMix is the default mix: names of services and endpoints asked in full, a fifth of them
// missing through the search path.
var serviceMix = []qkind{
	{"ClusterIP service A", 0.25, "NOERROR", false, "`<svc>.<ns>.svc.cluster.local` A"},
	{"headless service A", 0.10, "NOERROR", false, "`<svc>.<ns>.svc.cluster.local` A (every ready endpoint)"},
	{"endpoint A", 0.15, "NOERROR", false, "`<hostname or dashed IP>.<svc>.<ns>.svc.cluster.local` A"},
	{"SRV", 0.20, "NOERROR", false, "`_http._tcp.<svc>.<ns>.svc.cluster.local` SRV"},
	{"search-path miss", 0.20, "NXDOMAIN", true, "`<svc>.<ns>.svc.cluster.local.{<ns>.svc.cluster.local,svc.cluster.local,cluster.local}` A"},
	{"AAAA of IPv4-only service", 0.10, "NOERROR", true, "`<svc>.<ns>.svc.cluster.local` AAAA (NODATA)"},
}

// clusterMix (-mix cluster) is what a cluster's pods ask, as glibc with ndots:5 asks it: most
// names go through the search path first and miss (an outside name on every suffix, a service's
// short name on the others' namespaces), A and AAAA of ClusterIP services, SRV, headless sets,
// PTR of cluster IPs (a resolver naming its peers) and pod names (pods insecure).
var clusterMix = []qkind{
	{"search-path miss, outside name", 0.25, "NXDOMAIN", true, "`api.example.com.{<ns>.svc.cluster.local,svc.cluster.local,cluster.local}` A"},
	{"search-path miss, service", 0.15, "NXDOMAIN", true, "`<svc>.<ns>.svc.cluster.local.{<ns>.svc.cluster.local,svc.cluster.local,cluster.local}` A"},
	{"ClusterIP service A", 0.15, "NOERROR", false, "`<svc>.<ns>.svc.cluster.local` A"},
	{"AAAA of IPv4-only service", 0.10, "NOERROR", true, "`<svc>.<ns>.svc.cluster.local` AAAA (NODATA)"},
	{"SRV", 0.08, "NOERROR", false, "`_http._tcp.<svc>.<ns>.svc.cluster.local` SRV"},
	{"headless service A", 0.07, "NOERROR", false, "`<svc>.<ns>.svc.cluster.local` A (every ready endpoint)"},
	{"PTR of a cluster IP", 0.10, "NOERROR", false, "`<reversed cluster IP>.in-addr.arpa` PTR"},
	{"pod A", 0.10, "NOERROR", false, "`<dashed endpoint IP>.<ns>.pod.cluster.local` A"},
}

// Mixes are the query mixes -mix names.
var Mixes = map[string][]qkind{"service": serviceMix, "cluster": clusterMix}

type qline struct {
	name, qtype string
	kind        int
}

// querySet is the dnsperf query file's content.
type querySet struct {
	kinds  []qkind
	lines  []qline
	counts []int // per kind
}

// writeQueryFile makes cfg.Queries queries in the shares of cfg.Mix's kinds, shuffled with cfg.Seed.
func writeQueryFile(path string, cl *measure.Cluster, cfg Options) (*querySet, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6b75626574726565))
	var plain, headless []*measure.Service
	for _, s := range cl.Services {
		if s.Headless {
			headless = append(headless, s)
		} else {
			plain = append(plain, s)
		}
	}
	pick := func(pool []*measure.Service) *measure.Service {
		if len(pool) == 0 {
			pool = cl.Services
		}
		return pool[rng.IntN(len(pool))]
	}
	kinds := Mixes[cfg.Mix]
	if kinds == nil {
		return nil, fmt.Errorf("no query mix %q", cfg.Mix)
	}
	var plainIPs []*measure.Service // services with a cluster IP, for PTR
	for _, s := range plain {
		if s.ClusterIP != "" {
			plainIPs = append(plainIPs, s)
		}
	}
	qs := &querySet{kinds: kinds, counts: make([]int, len(kinds))}
	for k, kd := range kinds {
		n := int(math.Round(kd.share * float64(cfg.Queries)))
		for range n {
			var q qline
			switch kd.name {
			case "ClusterIP service A":
				q = qline{pick(plain).FQDN(), "A", k}
			case "headless service A":
				q = qline{pick(headless).FQDN(), "A", k}
			case "endpoint A":
				s := pick(cl.Services)
				q = qline{s.EndpointName(rng.IntN(len(s.IPs))) + "." + s.FQDN(), "A", k}
			case "SRV":
				q = qline{"_http._tcp." + pick(cl.Services).FQDN(), "SRV", k}
			case "search-path miss", "search-path miss, service":
				s := pick(cl.Services)
				suffix := []string{s.NS + ".svc.cluster.local.", "svc.cluster.local.", "cluster.local."}[rng.IntN(3)]
				q = qline{s.FQDN() + suffix, "A", k}
			case "search-path miss, outside name":
				ns := cl.Namespaces[rng.IntN(len(cl.Namespaces))]
				suffix := []string{ns + ".svc.cluster.local.", "svc.cluster.local.", "cluster.local."}[rng.IntN(3)]
				q = qline{"api.example.com." + suffix, "A", k}
			case "AAAA of IPv4-only service":
				q = qline{pick(cl.Services).FQDN(), "AAAA", k}
			case "PTR of a cluster IP":
				rev, err := dns.ReverseAddr(pick(plainIPs).ClusterIP)
				if err != nil {
					return nil, err
				}
				q = qline{rev, "PTR", k}
			case "pod A":
				s := pick(cl.Services)
				q = qline{strings.ReplaceAll(s.IPs[rng.IntN(len(s.IPs))], ".", "-") + "." + s.NS + ".pod.cluster.local.", "A", k}
			default:
				return nil, fmt.Errorf("no names for query kind %q", kd.name)
			}
			qs.lines = append(qs.lines, q)
			qs.counts[k]++
		}
	}
	rng.Shuffle(len(qs.lines), func(i, j int) { qs.lines[i], qs.lines[j] = qs.lines[j], qs.lines[i] })
	var b bytes.Buffer
	for _, q := range qs.lines {
		fmt.Fprintf(&b, "%s %s\n", q.name, q.qtype)
	}
	measure.Logf("query file: %d queries, %s", len(qs.lines), path)
	return qs, os.WriteFile(path, b.Bytes(), 0o644)
}

// expectedRcodes is the share of each rcode the query file should get back.
func (qs *querySet) expectedRcodes() map[string]float64 {
	m := map[string]float64{}
	for k, n := range qs.counts {
		m[qs.kinds[k].rcode] += float64(n) / float64(len(qs.lines))
	}
	return m
}

// runLoad runs a warm-up per server, then cfg.Rounds rounds; round r runs the servers in serverNames
// order rotated by r, one after the other.
func runLoad(ctx context.Context, servers map[string]*measure.Server, qfile, dir string, cfg Options) ([]measure.RunResult, error) {
	var runs []measure.RunResult
	if cfg.Warmup > 0 {
		for _, name := range serverNames {
			r, err := measure.Dnsperf(ctx, servers[name], "", qfile, dir, cfg.Warmup, cfg.DnsperfFlags)
			if err != nil {
				return nil, err
			}
			measure.Logf("warm-up %-10s %8.0f QPS", name, r.QPS)
		}
	}
	for round := 1; round <= cfg.Rounds; round++ {
		for i := range serverNames {
			name := serverNames[(i+round-1)%len(serverNames)]
			if err := measure.Sleep(ctx, 500*time.Millisecond); err != nil {
				return nil, err
			}
			var profile sync.WaitGroup
			if cfg.Profile && round == 1 && measure.ServerPprof[name] != "" && cfg.Duration > 2*time.Second {
				// The first round of each server, less a second at each end: where its CPU goes.
				profile.Go(func() {
					if measure.Sleep(ctx, time.Second) == nil {
						measure.ProfileCPU(ctx, name+"-load", measure.ServerPprof[name], cfg.ProfileDir, cfg.Duration-2*time.Second)
					}
				})
			}
			r, err := measure.Dnsperf(ctx, servers[name], "", qfile, dir, cfg.Duration, cfg.DnsperfFlags)
			profile.Wait()
			if err != nil {
				return nil, err
			}
			r.Round = round
			runs = append(runs, r)
			measure.Logf("round %d %-10s %8.0f QPS  avg %.3f ms  p99 %.3f ms  lost %d  server CPU %.2f s (%.3f s/100k)  dnsperf CPU %.2f s  %s",
				round, name, r.QPS, r.AvgLat*1000, r.P99*1000, r.Lost, r.CPU, r.CPUPer100k(), r.DnsperfCPU, measure.RcodeString(r.Rcodes))
		}
	}
	return runs, nil
}
