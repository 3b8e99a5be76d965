package informer

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubetree/kubetree/internal/metrics"
)

func TestUntilReachableRetriesOnlyAnUnreachableAPIServer(t *testing.T) {
	refused := &netOpError{syscall.ECONNREFUSED}
	gone := apierrors.NewResourceExpired("too old resource version")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", errors.New("no"))

	for _, tc := range []struct {
		name      string
		failures  []error // returned by the first calls, in order; then the call succeeds
		wantCalls int
		wantErr   error
	}{
		{"success at once", nil, 1, nil},
		{"connection refused, then the API server is back", []error{refused, refused, refused}, 4, nil},
		{"resource version too old goes to client-go, which relists", []error{gone}, 1, gone},
		{"forbidden goes to client-go", []error{forbidden}, 1, forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := untilReachable(context.Background(), &reconnect{resource: "services", metrics: metrics.New("test://reconnect", "cluster.local.")}, func() (int, error) {
				calls++
				if calls <= len(tc.failures) {
					return 0, tc.failures[calls-1]
				}
				return 1, nil
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) {
				t.Errorf("calls %d, err %v; want %d, %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}

func TestUntilReachableStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := untilReachable(ctx, &reconnect{resource: "services", metrics: metrics.New("test://reconnect", "cluster.local.")}, func() (int, error) {
			return 0, &netOpError{syscall.ECONNREFUSED}
		})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; err == nil {
		t.Error("a cancelled retry must return the last error")
	}
}

// netOpError is what dialing a closed port gives.
type netOpError struct{ err error }

func (e *netOpError) Error() string { return "dial tcp 127.0.0.1:1: " + e.err.Error() }
func (e *netOpError) Unwrap() error { return e.err }
