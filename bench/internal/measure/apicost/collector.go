package apicost

import "github.com/kubetree/kubetree/bench/internal/measure"

// Collector is what the API server's garbage collector did between two readings of its metrics.
// At 1M endpoints it collects about once a GB allocated, for a second or more, so whether a
// window of a few minutes holds a collection is chance: each window's allocations are charged at
// the collector's CPU per allocated byte over the whole run instead.
type Collector struct {
	CPU      float64 // its CPU seconds (go_cpu_classes_gc_total_cpu_seconds_total)
	Alloc    float64 // the heap bytes allocated meanwhile (go_gc_heap_allocs_bytes_total)
	Cycles   float64 // its cycles
	LiveHeap float64 // the heap live after the last collection, at the second reading
}

// CollectorBetween is the collector's work from first to last.
func CollectorBetween(first, last measure.APICounters) Collector {
	return Collector{CPU: last.GCCPU - first.GCCPU, Alloc: last.Alloc - first.Alloc, Cycles: last.GCCycles - first.GCCycles,
		LiveHeap: last.LiveHeap}
}

// PerByte is the collector's CPU per byte allocated.
func (c Collector) PerByte() float64 {
	if c.Alloc <= 0 {
		return 0
	}
	return c.CPU / c.Alloc
}
