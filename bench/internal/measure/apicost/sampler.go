package apicost

import (
	"slices"
	"sync"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// sample is the counters at one moment: CPU seconds by process, bytes through the proxy.
type sample struct {
	at       time.Time
	cpu      map[string]float64
	down, up float64
}

func diff(a, b sample) sample {
	d := sample{at: b.at, cpu: map[string]float64{}, down: b.down - a.down, up: b.up - a.up}
	for k, v := range b.cpu {
		d.cpu[k] = v - a.cpu[k]
	}
	return d
}

func (s sample) plus(d sample) sample {
	out := sample{cpu: map[string]float64{}, down: s.down + d.down, up: s.up + d.up}
	for k, v := range s.cpu {
		out.cpu[k] = v
	}
	for k, v := range d.cpu {
		out.cpu[k] += v
	}
	return out
}

// at is the last sample taken at or before t (the first if none).
func at(samples []sample, t time.Time) sample {
	i, _ := slices.BinarySearchFunc(samples, t, func(s sample, t time.Time) int {
		if s.at.After(t) {
			return 1
		}
		return -1
	})
	return samples[max(i-1, 0)]
}

// sampler reads the processes' CPU times and the proxy's byte counts every 50 ms.
type sampler struct {
	mu      sync.Mutex
	taken   []sample
	done    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

func startSampler(pids map[string]int, p *measure.CountingProxy) *sampler {
	s := &sampler{done: make(chan struct{}), stopped: make(chan struct{})}
	take := func() {
		smp := sample{at: time.Now(), cpu: map[string]float64{}, down: float64(p.Down.Load()), up: float64(p.Up.Load())}
		for name, pid := range pids {
			if v, err := measure.ProcCPU(pid); err == nil {
				smp.cpu[name] = v
			}
		}
		s.mu.Lock()
		s.taken = append(s.taken, smp)
		s.mu.Unlock()
	}
	take()
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()
	return s
}

func (s *sampler) stop() {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
}

func (s *sampler) samples() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.taken)
}
