package measure

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DnsperfFlags are dnsperf's -c and -q.
type DnsperfFlags struct {
	Clients     int // -c: clients (sockets)
	Outstanding int // -q: queries outstanding at once
}

// RunResult is one dnsperf run against one server.
type RunResult struct {
	Server     string
	Round      int // 0 is the warm-up
	QPS        float64
	AvgLat     float64 // seconds, dnsperf's average
	P50, P99   float64 // seconds, from dnsperf -v's per-query latencies
	sent       int
	Completed  int
	Lost       int
	CPU        float64 // server CPU seconds (utime+stime) during the run
	DnsperfCPU float64 // dnsperf's own CPU seconds
	Wall       float64 // dnsperf's run time, seconds
	Rcodes     map[string]int
}

// CPUPer100k is the server's CPU seconds per 100,000 completed queries.
func (r RunResult) CPUPer100k() float64 {
	if r.Completed == 0 {
		return math.NaN()
	}
	return r.CPU / float64(r.Completed) * 100000
}

// Dnsperf runs dnsperf -v against s for d, from source ("" for any address); the per-query lines
// go to a file that is read afterwards, so that reading them costs no CPU during the run.
func Dnsperf(ctx context.Context, s *Server, source, qfile, dir string, d time.Duration, cfg DnsperfFlags) (RunResult, error) {
	r := RunResult{Server: s.Name, Rcodes: map[string]int{}}
	if e := s.Exited(); e != "" {
		return r, fmt.Errorf("%s exited: %s", s.Name, e)
	}
	out := filepath.Join(dir, "dnsperf-"+s.Name+".out")
	f, err := os.Create(out)
	if err != nil {
		return r, err
	}
	defer os.Remove(out)
	var stderr bytes.Buffer
	args := []string{"-s", "127.0.0.1", "-p", Port(s.Addr), "-d", qfile,
		"-l", strconv.FormatFloat(d.Seconds(), 'f', -1, 64),
		"-c", strconv.Itoa(cfg.Clients), "-q", strconv.Itoa(cfg.Outstanding), "-t", "1", "-v"}
	if source != "" {
		args = append(args, "-a", source) // queries from a pod's address, for autopath
	}
	cmd := exec.CommandContext(ctx, "dnsperf", args...)
	cmd.Stdout, cmd.Stderr = f, &stderr
	cmd.WaitDelay = 5 * time.Second
	before, err := s.CPU()
	if err != nil {
		f.Close()
		return r, err
	}
	err = cmd.Run()
	f.Close()
	after, cerr := s.CPU()
	if err != nil {
		if ctx.Err() != nil {
			return r, context.Cause(ctx)
		}
		return r, fmt.Errorf("dnsperf against %s: %v\n%s", s.Name, err, stderr.String())
	}
	if cerr != nil {
		return r, cerr
	}
	r.CPU = after - before
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.DnsperfCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if err := parseDnsperf(out, &r); err != nil {
		return r, fmt.Errorf("dnsperf against %s: %v\n%s", s.Name, err, stderr.String())
	}
	return r, nil
}

// parseDnsperf reads dnsperf -v output: a "> RCODE NAME TYPE LATENCY" line per answered query, then
// the statistics.
func parseDnsperf(path string, r *RunResult) error {
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
					r.Rcodes[fl[0]]++
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
			r.Completed = int(num())
			seen++
		case "Queries lost":
			r.Lost = int(num())
		case "Queries per second":
			r.QPS = num()
			seen++
		case "Average Latency (s)":
			r.AvgLat = num()
			seen++
		case "Run time (s)":
			r.Wall = num()
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
	r.P50 = float64(lat[len(lat)/2])
	r.P99 = float64(lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)])
	return nil
}

// RcodeString is each rcode's share of the replies counted in m, e.g. "NOERROR 70.0%, NXDOMAIN 30.0%".
func RcodeString(m map[string]int) string {
	total := 0
	for _, n := range m {
		total += n
	}
	return Shares(m, total)
}
