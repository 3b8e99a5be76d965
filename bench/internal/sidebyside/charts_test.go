package sidebyside

import (
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

var chartsOut = flag.String("charts.out", "", "write the test's charts here to look at them (default: a temporary directory)")

// sampleResults is a small run's worth of numbers, shaped like a real run's.
func sampleResults() *results {
	r := newResults(Options{Propagation: 20})
	r.cluster = &measure.Cluster{Services: make([]*measure.Service, 5000), Endpoints: 10}
	r.memSync = map[string]measure.Mem{
		"kubernetes": {RSS: 157 << 20, Heap: 43 << 20},
		"kubetree":   {RSS: 100 << 20, Heap: 16 << 20},
		"whoami":     {RSS: 81 << 20, Heap: 5 << 20},
	}
	for i, n := range []int{500, 1000, 2000, 3500} {
		f := float64(i+1) / 5
		r.sizes = append(r.sizes, sizePoint{services: n, endpoints: 10 * n, mem: map[string]measure.Mem{
			"kubernetes": {RSS: (81 + 75*f) * (1 << 20), Heap: (5 + 38*f) * (1 << 20)},
			"kubetree":   {RSS: (81 + 19*f) * (1 << 20), Heap: (5 + 11*f) * (1 << 20)},
		}})
	}
	for round := range 4 {
		for i, name := range serverNames {
			r.runs = append(r.runs, measure.RunResult{Server: name, Round: round, QPS: float64(45000 + 10000*i + 500*round),
				CPU: float64(3-i) * 0.6, Completed: 200000})
		}
	}
	r.prop = &propResult{n: 20, create: map[string][]time.Duration{}, del: map[string][]time.Duration{}}
	for i := range 20 {
		for _, name := range []string{"kubernetes", "kubetree"} {
			r.prop.create[name] = append(r.prop.create[name], time.Duration(i+1)*700*time.Microsecond)
			r.prop.del[name] = append(r.prop.del[name], time.Duration(i+1)*300*time.Microsecond)
		}
	}
	r.prop.del["kubetree"][0] = 0 // a log axis cannot show 0: it must still draw
	return r
}

// TestWriteCharts: every chart is written, is well-formed SVG, and carries its title; the report
// embeds each.
func TestWriteCharts(t *testing.T) {
	dir := *chartsOut
	if dir == "" {
		dir = t.TempDir()
	}
	r := sampleResults()
	charts, err := r.writeCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"bench-memory.svg":      "Memory after sync against cluster size",
		"bench-qps-cpu.svg":     "CPU per query",
		"bench-propagation.svg": "Propagation",
	}
	if len(charts) != len(want) {
		t.Fatalf("%d charts, want %d", len(charts), len(want))
	}
	for _, c := range charts {
		data, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(strings.NewReader(string(data)))
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed XML: %v", c.file, err)
			}
		}
		if !strings.Contains(string(data), "<svg") || !strings.Contains(string(data), want[c.file]) {
			t.Errorf("%s: no <svg> or no %q in it", c.file, want[c.file])
		}
	}
	r.charts = charts
	r.machine = measure.Machine{}
	r.queryMix = &querySet{kinds: serviceMix, counts: make([]int, len(serviceMix))}
	r.diff = &diffReport{}
	md := r.markdown()
	for f := range want {
		if !strings.Contains(md, "]("+f+")") {
			t.Errorf("the report does not embed %s", f)
		}
	}
	if !strings.Contains(md, "| 3500 | 35000 |") {
		t.Errorf("the report has no memory row for 3500 services")
	}
}

// TestSizes: -sizes' parsing and its default.
func TestSizes(t *testing.T) {
	if got := DefaultSizes(5000); len(got) != 4 || got[0] != 500 || got[3] != 3500 {
		t.Errorf("defaultSizes(5000) = %v", got)
	}
	if got := DefaultSizes(3); len(got) != 2 {
		t.Errorf("defaultSizes(3) = %v, want two distinct sizes", got)
	}
	if got, err := ParseSizes("100, 200,400", 500); err != nil || len(got) != 3 {
		t.Errorf("parseSizes: %v, %v", got, err)
	}
	if got, err := ParseSizes("none", 500); err != nil || got != nil {
		t.Errorf("parseSizes(none): %v, %v", got, err)
	}
	for _, bad := range []string{"200,100", "500", "0", "x", "100,100"} {
		if _, err := ParseSizes(bad, 500); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}
