package sidebyside

import (
	"testing"
)

func TestParseModelHeap(t *testing.T) {
	out := "goos: linux\nBenchmarkScale-2   \t       1\t18276381196 ns/op\t        91.96 B/endpoint\t       755.7 B/service\t   1000000 endpoints\t       159.8 heap-MiB\t         5.787 load-s\nPASS\n"
	h, err := parseModelHeap(out)
	if err != nil {
		t.Fatal(err)
	}
	if *h != (modelHeap{heapMiB: 159.8, perService: 755.7, perEndpoint: 91.96}) {
		t.Errorf("parsed %+v", *h)
	}
	if _, err := parseModelHeap("BenchmarkScale-2 1 5 ns/op\nPASS\n"); err == nil {
		t.Error("a line without the heap figures parsed")
	}
}
