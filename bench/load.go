package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A query kind of the load mix.
type qkind struct {
	name   string
	share  float64
	rcode  string // what both plugins should answer
	miss   bool   // one of the 30% that find nothing
	source string // how the name is made
}

var kinds = []qkind{
	{"ClusterIP service A", 0.25, "NOERROR", false, "`<svc>.<ns>.svc.cluster.local` A"},
	{"headless service A", 0.10, "NOERROR", false, "`<svc>.<ns>.svc.cluster.local` A (every ready endpoint)"},
	{"endpoint A", 0.15, "NOERROR", false, "`<hostname or dashed IP>.<svc>.<ns>.svc.cluster.local` A"},
	{"SRV", 0.20, "NOERROR", false, "`_http._tcp.<svc>.<ns>.svc.cluster.local` SRV"},
	{"search-path miss", 0.20, "NXDOMAIN", true, "`<svc>.<ns>.svc.cluster.local.{<ns>.svc.cluster.local,svc.cluster.local,cluster.local}` A"},
	{"AAAA of IPv4-only service", 0.10, "NOERROR", true, "`<svc>.<ns>.svc.cluster.local` AAAA (NODATA)"},
}

type qline struct {
	name, qtype string
	kind        int
}

// querySet is the dnsperf query file's content.
type querySet struct {
	lines  []qline
	counts []int // per kind
}

// writeQueryFile makes cfg.queries queries in the shares of kinds, shuffled with cfg.seed.
func writeQueryFile(path string, cl *cluster, cfg *config) (*querySet, error) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x6b75626574726565))
	var plain, headless []*svc
	for _, s := range cl.services {
		if s.headless {
			headless = append(headless, s)
		} else {
			plain = append(plain, s)
		}
	}
	pick := func(pool []*svc) *svc {
		if len(pool) == 0 {
			pool = cl.services
		}
		return pool[rng.IntN(len(pool))]
	}
	qs := &querySet{counts: make([]int, len(kinds))}
	for k, kd := range kinds {
		n := int(math.Round(kd.share * float64(cfg.queries)))
		for range n {
			var q qline
			switch kd.name {
			case "ClusterIP service A":
				q = qline{pick(plain).fqdn(), "A", k}
			case "headless service A":
				q = qline{pick(headless).fqdn(), "A", k}
			case "endpoint A":
				s := pick(cl.services)
				q = qline{s.endpointName(rng.IntN(len(s.ips))) + "." + s.fqdn(), "A", k}
			case "SRV":
				q = qline{"_http._tcp." + pick(cl.services).fqdn(), "SRV", k}
			case "search-path miss":
				s := pick(cl.services)
				suffix := []string{s.ns + ".svc.cluster.local.", "svc.cluster.local.", "cluster.local."}[rng.IntN(3)]
				q = qline{s.fqdn() + suffix, "A", k}
			case "AAAA of IPv4-only service":
				q = qline{pick(cl.services).fqdn(), "AAAA", k}
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
	logf("query file: %d queries, %s", len(qs.lines), path)
	return qs, os.WriteFile(path, b.Bytes(), 0o644)
}

// expectedRcodes is the share of each rcode the query file should get back.
func (qs *querySet) expectedRcodes() map[string]float64 {
	m := map[string]float64{}
	for k, n := range qs.counts {
		m[kinds[k].rcode] += float64(n) / float64(len(qs.lines))
	}
	return m
}

// runResult is one dnsperf run against one server.
type runResult struct {
	server     string
	round      int // 0 is the warm-up
	qps        float64
	avgLat     float64 // seconds, dnsperf's average
	p50, p99   float64 // seconds, from dnsperf -v's per-query latencies
	sent       int
	completed  int
	lost       int
	cpu        float64 // server CPU seconds (utime+stime) during the run
	dnsperfCPU float64 // dnsperf's own CPU seconds
	wall       float64 // dnsperf's run time, seconds
	rcodes     map[string]int
}

func (r runResult) cpuPer100k() float64 {
	if r.completed == 0 {
		return math.NaN()
	}
	return r.cpu / float64(r.completed) * 100000
}

// runLoad runs a warm-up per server, then cfg.rounds rounds; round r runs the servers in serverNames
// order rotated by r, one after the other.
func runLoad(ctx context.Context, servers map[string]*server, qfile, dir string, cfg *config) ([]runResult, error) {
	var runs []runResult
	if cfg.warmup > 0 {
		for _, name := range serverNames {
			r, err := dnsperf(ctx, servers[name], "", qfile, dir, cfg.warmup, cfg)
			if err != nil {
				return nil, err
			}
			logf("warm-up %-10s %8.0f QPS", name, r.qps)
		}
	}
	for round := 1; round <= cfg.rounds; round++ {
		for i := range serverNames {
			name := serverNames[(i+round-1)%len(serverNames)]
			if err := sleep(ctx, 500*time.Millisecond); err != nil {
				return nil, err
			}
			r, err := dnsperf(ctx, servers[name], "", qfile, dir, cfg.duration, cfg)
			if err != nil {
				return nil, err
			}
			r.round = round
			runs = append(runs, r)
			logf("round %d %-10s %8.0f QPS  avg %.3f ms  p99 %.3f ms  lost %d  server CPU %.2f s (%.3f s/100k)  dnsperf CPU %.2f s  %s",
				round, name, r.qps, r.avgLat*1000, r.p99*1000, r.lost, r.cpu, r.cpuPer100k(), r.dnsperfCPU, rcodeString(r.rcodes))
		}
	}
	return runs, nil
}

// dnsperf runs dnsperf -v against s for d, from source ("" for any address); the per-query lines
// go to a file that is read afterwards, so that reading them costs no CPU during the run.
func dnsperf(ctx context.Context, s *server, source, qfile, dir string, d time.Duration, cfg *config) (runResult, error) {
	r := runResult{server: s.name, rcodes: map[string]int{}}
	if e := s.exited(); e != "" {
		return r, fmt.Errorf("%s exited: %s", s.name, e)
	}
	out := filepath.Join(dir, "dnsperf-"+s.name+".out")
	f, err := os.Create(out)
	if err != nil {
		return r, err
	}
	defer os.Remove(out)
	var stderr bytes.Buffer
	args := []string{"-s", "127.0.0.1", "-p", port(s.addr), "-d", qfile,
		"-l", strconv.FormatFloat(d.Seconds(), 'f', -1, 64),
		"-c", strconv.Itoa(cfg.clients), "-q", strconv.Itoa(cfg.outstanding), "-t", "1", "-v"}
	if source != "" {
		args = append(args, "-a", source) // queries from a pod's address, for autopath
	}
	cmd := exec.CommandContext(ctx, "dnsperf", args...)
	cmd.Stdout, cmd.Stderr = f, &stderr
	cmd.WaitDelay = 5 * time.Second
	before, err := s.cpu()
	if err != nil {
		f.Close()
		return r, err
	}
	err = cmd.Run()
	f.Close()
	after, cerr := s.cpu()
	if err != nil {
		if ctx.Err() != nil {
			return r, context.Cause(ctx)
		}
		return r, fmt.Errorf("dnsperf against %s: %v\n%s", s.name, err, stderr.String())
	}
	if cerr != nil {
		return r, cerr
	}
	r.cpu = after - before
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.dnsperfCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if err := parseDnsperf(out, &r); err != nil {
		return r, fmt.Errorf("dnsperf against %s: %v\n%s", s.name, err, stderr.String())
	}
	return r, nil
}

// parseDnsperf reads dnsperf -v output: a "> RCODE NAME TYPE LATENCY" line per answered query, then
// the statistics.
func parseDnsperf(path string, r *runResult) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	lat := make([]float32, 0, 1<<20)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := 0
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "> "); ok {
			fl := strings.Fields(rest)
			if len(fl) >= 2 {
				if v, err := strconv.ParseFloat(fl[len(fl)-1], 32); err == nil {
					lat = append(lat, float32(v))
					r.rcodes[fl[0]]++
				}
			}
			continue
		}
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		first := strings.Fields(v)
		if len(first) == 0 {
			continue
		}
		num := func() float64 { x, _ := strconv.ParseFloat(first[0], 64); return x }
		switch k {
		case "Queries sent":
			r.sent = int(num())
			seen++
		case "Queries completed":
			r.completed = int(num())
			seen++
		case "Queries lost":
			r.lost = int(num())
		case "Queries per second":
			r.qps = num()
			seen++
		case "Average Latency (s)":
			r.avgLat = num()
			seen++
		case "Run time (s)":
			r.wall = num()
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if seen < 4 {
		return fmt.Errorf("no statistics in the dnsperf output %s", path)
	}
	if len(lat) == 0 {
		return fmt.Errorf("no per-query latencies in the dnsperf -v output")
	}
	slices.Sort(lat)
	r.p50 = float64(lat[len(lat)/2])
	r.p99 = float64(lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)])
	return nil
}

func rcodeString(m map[string]int) string {
	total := 0
	for _, n := range m {
		total += n
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", k, 100*float64(m[k])/float64(total)))
	}
	return strings.Join(parts, ", ")
}
