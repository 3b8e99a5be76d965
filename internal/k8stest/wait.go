package k8stest

import (
	"testing"
	"time"
)

// WaitFor polls cond for up to 10 s: for what a test cannot wait on with a barrier.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitUntil(t, what, 10*time.Second, cond)
}

// WaitUntil polls cond every 2 ms for up to limit, and fails t after it.
func WaitUntil(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting %s for %s", limit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
