package measure

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ScrapeCost reads the API server's metrics twice: the first reading, and what one scrape made
// it allocate (two readings of its allocation counter always have one scrape's worth between them).
func (cp *ControlPlane) ScrapeCost(ctx context.Context) (APICounters, float64, error) {
	first, err := cp.APIMetrics(ctx)
	if err != nil {
		return first, 0, err
	}
	second, err := cp.APIMetrics(ctx)
	if err != nil {
		return first, 0, err
	}
	return first, second.Alloc - first.Alloc, nil
}

// APICounters are the API server's own counters at one moment.
type APICounters struct {
	Lists, Sizes           map[string]float64 // LIST requests and response bytes so far, by resource
	Alloc, GCCPU, GCCycles float64            // heap bytes allocated, the collector's CPU seconds, its cycles
	LiveHeap               float64            // the heap live after the last collection
}

// APIMetrics reads the API server's counters from its /metrics.
func (cp *ControlPlane) APIMetrics(ctx context.Context) (APICounters, error) {
	c := APICounters{Lists: map[string]float64{}, Sizes: map[string]float64{}}
	raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return c, fmt.Errorf("the API server's metrics: %w", err)
	}
	resource := regexp.MustCompile(`[{,]resource="([^"]*)"`)
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "go_gc_heap_allocs_bytes_total":
			c.Alloc = v
		case "go_cpu_classes_gc_total_cpu_seconds_total":
			c.GCCPU = v
		case "go_gc_cycles_total_gc_cycles_total":
			c.GCCycles = v
		case "go_gc_heap_live_bytes":
			c.LiveHeap = v
		}
		var into map[string]float64
		switch {
		case strings.HasPrefix(l, "apiserver_request_total{"):
			into = c.Lists
		case strings.HasPrefix(l, "apiserver_response_sizes_sum{"):
			into = c.Sizes
		default:
			continue
		}
		if m := resource.FindStringSubmatch(l); m != nil && strings.Contains(l, `verb="LIST"`) {
			into[m[1]] += v
		}
	}
	return c, sc.Err()
}
