package sidebyside

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// sizePoint is the memory of both plugins, each synced to the cluster at one size.
type sizePoint struct {
	services, endpoints int
	mem                 map[string]measure.Mem // kubernetes, kubetree
}

// ParseSizes reads -sizes: service counts, ascending, each below -services. "none" is no sweep.
func ParseSizes(s string, services int) ([]int, error) {
	if s == "none" {
		return nil, nil
	}
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("-sizes: %w", err)
		}
		if n < 1 || n >= services || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return nil, fmt.Errorf("-sizes %q: want ascending service counts between 1 and -services (%d), exclusive", s, services)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// DefaultSizes are a tenth, a fifth, two fifths and seven tenths of the cluster: with the full
// cluster, five sizes for the memory chart.
func DefaultSizes(services int) []int {
	var sizes []int
	for _, f := range []float64{0.1, 0.2, 0.4, 0.7} {
		if n := int(f * float64(services)); n >= 1 && (len(sizes) == 0 || n > sizes[len(sizes)-1]) {
			sizes = append(sizes, n)
		}
	}
	return sizes
}

// measureSize starts kubernetes and kubetree on the cluster as it is now, waits until each answers
// for the last service created, and takes both processes' memory 5 s later (as the main run does
// after its start-up trials). Both are stopped before it returns.
func measureSize(ctx context.Context, dir, kubeconfig string, cl *measure.Cluster, step int) (sizePoint, error) {
	pt := sizePoint{services: len(cl.Services), endpoints: len(cl.Services) * cl.Endpoints, mem: map[string]measure.Mem{}}
	probe := cl.Probe()
	var started []*measure.Server
	defer func() {
		for _, s := range started {
			s.Stop()
		}
	}()
	for _, p := range []string{"kubernetes", "kubetree"} {
		s, err := measure.StartServer(ctx, dir, p, 1000+step, kubeconfig)
		if err != nil {
			return pt, err
		}
		started = append(started, s)
		if _, err := s.WaitStartup(ctx, probe.Name, probe.IP); err != nil {
			return pt, fmt.Errorf("%s at %d services: %w", p, pt.services, err)
		}
	}
	if err := measure.Sleep(ctx, 5*time.Second); err != nil {
		return pt, err
	}
	for _, s := range started {
		m, err := s.Memory(ctx)
		if err != nil {
			return pt, err
		}
		if e := s.Exited(); e != "" {
			return pt, fmt.Errorf("%s exited at %d services: %s", s.Name, pt.services, e)
		}
		pt.mem[s.Name] = m
		measure.Logf("%d services: %s RSS %s, heap %s", pt.services, s.Name, measure.MiB(m.RSS), measure.MiB(m.Heap))
	}
	return pt, nil
}

// sizeSeries is the sweep with the main run's cluster (memory after sync) as its last point.
func (r *results) sizeSeries() []sizePoint {
	pts := slices.Clone(r.sizes)
	if m := r.memSync; r.cluster != nil && m["kubetree"].RSS > 0 {
		pts = append(pts, sizePoint{
			services: len(r.cluster.Services), endpoints: len(r.cluster.Services) * r.cluster.Endpoints,
			mem: map[string]measure.Mem{"kubernetes": m["kubernetes"], "kubetree": m["kubetree"]},
		})
	}
	return pts
}
