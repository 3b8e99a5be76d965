package measure

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// PaceTokens hands tokens 0, 1, 2, ... to the writers at rate a second, every 10 ms what is due,
// until stop or ctx ends, then closes tokens; what the writers cannot take is dropped and counted
// in dropped (the achieved rate is reported).
func PaceTokens(ctx context.Context, stop <-chan struct{}, tokens chan<- int, rate int, dropped *atomic.Int64) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	n, began := 0, time.Now()
	defer close(tokens)
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := int(time.Since(began).Seconds() * float64(rate))
		for ; n < due; n++ {
			select {
			case tokens <- n:
			default:
				dropped.Add(1)
			}
		}
	}
}

// Parallel runs f for from..to-1 on workers goroutines, with a progress line every 5 s.
func Parallel(ctx context.Context, workers, from, to int, verb string, f func(int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				n := int(next.Add(1) - 1)
				if n >= to || ctx.Err() != nil {
					return
				}
				if err := f(n); err != nil {
					cancel(err)
					return
				}
				done.Add(1)
			}
		})
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				Logf("%s %d/%d (%.0f/s)", verb, done.Load(), to-from, float64(done.Load())/time.Since(start).Seconds())
			}
		}
	}()
	wg.Wait()
	close(stop)
	return context.Cause(ctx)
}
