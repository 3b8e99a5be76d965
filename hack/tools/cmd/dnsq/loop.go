package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// A loop case is TYPE:NAME=WANT, WANT the answer's lines sorted and joined by "; ", e.g.
// "a:web=10.96.4.7" or "srv:_http._tcp.hl=0 100 80 h1.hl.baz.svc.cluster.local.".
type loopCase struct{ typ, name, want string }

func parseCase(arg string) (loopCase, error) {
	typ, rest, ok := strings.Cut(arg, ":")
	name, want, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || typ == "" || name == "" || want == "" {
		return loopCase{}, fmt.Errorf("case %q: want TYPE:NAME=WANT", arg)
	}
	return loopCase{typ, name, want}, nil
}

// retryAfter is the resolver's per-try timeout (resolv.conf's default): a lookup that took longer
// was answered by a second try.
const retryAfter = 5 * time.Second

// loopSummary is what the loop prints when stdin closes.
type loopSummary struct {
	Queries  int      `json:"queries"`
	UDP      int      `json:"udp"`
	TCP      int      `json:"tcp"`
	Failed   int      `json:"failed"`
	Failures []string `json:"failures,omitempty"` // the first 50: when, transport, case, what came back
	// Retried counts the lookups answered only after the resolver's first try went unanswered
	// (slower than its per-try timeout, resolv.conf's "timeout", 5 s by default).
	Retried int      `json:"retried"`
	Retries []string `json:"retries,omitempty"` // the first 50
	P50     float64  `json:"p50_ms"`
	P99     float64  `json:"p99_ms"`
	Max     float64  `json:"max_ms"`
	// Took is every lookup's time in ms, sorted: percentiles over several loops' lookups.
	Took []float64 `json:"took_ms"`
}

// loop asks the cases one after the other, without pause, over UDP then TCP in turn (the pod's
// resolv.conf for both: nameserver, search path, ndots, timeout and attempts), until in reaches
// EOF or, with until set, until that name resolves (asked once a second, not counted): a loop
// that is a pod's main process outlives the API server, which a kubectl exec session does not.
// A lookup fails as an application's would: when the resolver gives up (after its attempts,
// 2 × 5 s by default) or answers wrong; a lookup that needed a second try is counted apart.
// With every set, a lookup starts at most every that long: a client at a pace of its own, not
// as fast as the server answers.
func loop(args []string, in io.Reader, until, client string, every time.Duration, out io.Writer) error {
	var cases []loopCase
	for _, a := range args {
		c, err := parseCase(a)
		if err != nil {
			return err
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return fmt.Errorf("usage: dnsq -t loop TYPE:NAME=WANT [TYPE:NAME=WANT]")
	}
	udp := &net.Resolver{PreferGo: true}
	stopped := stopSignal(in, until, udp)
	// A connection that is not a PacketConn makes the Go resolver speak DNS over TCP.
	tcp := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, address string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", address)
	}}
	var s loopSummary
	var took []time.Duration
	start := time.Now()
	var connected *connectedClient
	if client == "udp-connected" {
		conf, err := readResolvConf("/etc/resolv.conf")
		if err != nil {
			return err
		}
		if connected, err = newConnectedClient(conf); err != nil {
			return err
		}
	}
	next := time.Now()
	for i := 0; !stopped.Load(); i++ {
		if every > 0 {
			time.Sleep(time.Until(next))
			next = next.Add(every)
		}
		c := cases[i%len(cases)]
		r, transport := udp, "udp"
		switch {
		case client == "tcp" || client == "mixed" && (i/len(cases))%2 == 1:
			r, transport = tcp, "tcp"
		case client == "udp-connected":
			transport = "udp" // one socket for all: counted as UDP
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t0 := time.Now()
		var lines []string
		var err error
		if connected != nil {
			lines, err = connected.lookup(c.typ, c.name)
		} else {
			lines, err = lookup(ctx, r, c.typ, c.name)
		}
		d := time.Since(t0)
		took = append(took, d)
		cancel()
		sort.Strings(lines)
		got := strings.Join(lines, "; ")
		// When, both since the loop's start and on the clock, to set beside the DNS pods' logs.
		s.count(fmt.Sprintf("%s (%s) %s %s:%s", t0.Sub(start).Round(time.Millisecond), t0.UTC().Format("15:04:05.000"), transport, c.typ, c.name),
			transport, d, got, c.want, err)
	}
	s.percentiles(took)
	return json.NewEncoder(out).Encode(s)
}

// stopSignal is set when in reaches EOF or, with until set, once that name resolves (asked once a
// second).
func stopSignal(in io.Reader, until string, r *net.Resolver) *atomic.Bool {
	var stopped atomic.Bool
	go func() {
		if until == "" {
			io.Copy(io.Discard, in)
			stopped.Store(true)
			return
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := r.LookupHost(ctx, until)
			cancel()
			if err == nil {
				stopped.Store(true)
				return
			}
			time.Sleep(time.Second)
		}
	}()
	return &stopped
}

// count adds one lookup, described by what (when, transport, case), that took d and got got
// (want wanted) or err.
func (s *loopSummary) count(what, transport string, d time.Duration, got, want string, err error) {
	s.Queries++
	if transport == "udp" {
		s.UDP++
	} else {
		s.TCP++
	}
	if d >= retryAfter && err == nil {
		s.Retried++
		if len(s.Retries) < 50 {
			s.Retries = append(s.Retries, fmt.Sprintf("%s: %s", what, d.Round(time.Millisecond)))
		}
	}
	if err != nil || got != want {
		s.Failed++
		if len(s.Failures) < 50 {
			s.Failures = append(s.Failures, fmt.Sprintf("%s: %q %v", what, got, err))
		}
	}
}

// percentiles sets the summary's p50, p99 and max, and every lookup's time, from took.
func (s *loopSummary) percentiles(took []time.Duration) {
	sort.Slice(took, func(a, b int) bool { return took[a] < took[b] })
	ms := func(q float64) float64 {
		if len(took) == 0 {
			return 0
		}
		return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000
	}
	s.P50, s.P99, s.Max = ms(0.5), ms(0.99), ms(1)
	for _, d := range took {
		s.Took = append(s.Took, float64(d.Microseconds())/1000)
	}
}
