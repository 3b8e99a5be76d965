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

// loopSummary is what the loop prints when stdin closes.
type loopSummary struct {
	Queries  int      `json:"queries"`
	UDP      int      `json:"udp"`
	TCP      int      `json:"tcp"`
	Failed   int      `json:"failed"`
	Failures []string `json:"failures,omitempty"` // the first 50: when, transport, case, what came back
	P50      float64  `json:"p50_ms"`
	P99      float64  `json:"p99_ms"`
	Max      float64  `json:"max_ms"`
}

// loop asks the cases one after the other, without pause, over UDP then TCP in turn (the pod's
// resolv.conf for both: nameserver, search path, ndots), until in reaches EOF; each lookup gives
// up after 5 s. It counts a wrong answer as a failure as much as an error.
func loop(args []string, in io.Reader, out io.Writer) error {
	var cases []loopCase
	for _, a := range args {
		c, err := parseCase(a)
		if err != nil {
			return err
		}
		cases = append(cases, c)
	}
	if len(cases) == 0 {
		return fmt.Errorf("usage: dnsq -t loop TYPE:NAME=WANT...")
	}
	var stopped atomic.Bool
	go func() {
		io.Copy(io.Discard, in)
		stopped.Store(true)
	}()
	udp := &net.Resolver{PreferGo: true}
	// A connection that is not a PacketConn makes the Go resolver speak DNS over TCP.
	tcp := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, address string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", address)
	}}
	var s loopSummary
	var took []time.Duration
	start := time.Now()
	for i := 0; !stopped.Load(); i++ {
		c := cases[i%len(cases)]
		r, transport := udp, "udp"
		if (i/len(cases))%2 == 1 {
			r, transport = tcp, "tcp"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t0 := time.Now()
		lines, err := lookup(ctx, r, c.typ, c.name)
		took = append(took, time.Since(t0))
		cancel()
		sort.Strings(lines)
		got := strings.Join(lines, "; ")
		s.Queries++
		if transport == "udp" {
			s.UDP++
		} else {
			s.TCP++
		}
		if err != nil || got != c.want {
			s.Failed++
			if len(s.Failures) < 50 {
				s.Failures = append(s.Failures, fmt.Sprintf("%s %s %s:%s: %q %v",
					time.Since(start).Round(time.Millisecond), transport, c.typ, c.name, got, err))
			}
		}
	}
	sort.Slice(took, func(a, b int) bool { return took[a] < took[b] })
	ms := func(q float64) float64 {
		if len(took) == 0 {
			return 0
		}
		return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000
	}
	s.P50, s.P99, s.Max = ms(0.5), ms(0.99), ms(1)
	return json.NewEncoder(out).Encode(s)
}
