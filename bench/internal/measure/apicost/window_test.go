package apicost

import "testing"

func TestTrimmedCPU(t *testing.T) {
	// 40 seconds at 0.1 s and two of a collection at 1.1 s: the busiest 5% (two) count as 0.1.
	sec := make([]float64, 40)
	for i := range sec {
		sec[i] = 0.1
	}
	sec[7], sec[30] = 1.1, 1.1
	if got := trimmedCPU(sec); !near(got, 4) {
		t.Errorf("trimmed %v, want 4", got)
	}
	if trimmedCPU(nil) != 0 {
		t.Error("no seconds, some CPU")
	}
}

func near(a, b float64) bool { return a-b < 1e-9*max(1, b) && b-a < 1e-9*max(1, b) }
