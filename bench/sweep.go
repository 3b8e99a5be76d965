package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sizePoint is the memory of both plugins, each synced to the cluster at one size.
type sizePoint struct {
	services, endpoints int
	mem                 map[string]mem // kubernetes, kubetree
}

// parseSizes reads -sizes: service counts, ascending, each below -services. "none" is no sweep.
func parseSizes(s string, services int) ([]int, error) {
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

// defaultSizes are a tenth, a fifth, two fifths and seven tenths of the cluster: with the full
// cluster, five sizes for the memory chart.
func defaultSizes(services int) []int {
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
func measureSize(ctx context.Context, dir, kubeconfig string, cl *cluster, step int) (sizePoint, error) {
	pt := sizePoint{services: len(cl.services), endpoints: len(cl.services) * cl.endpoints, mem: map[string]mem{}}
	probe := cl.probe()
	var started []*server
	defer func() {
		for _, s := range started {
			s.stop()
		}
	}()
	for _, p := range []string{"kubernetes", "kubetree"} {
		s, err := startServer(ctx, dir, p, 1000+step, kubeconfig)
		if err != nil {
			return pt, err
		}
		started = append(started, s)
		if _, err := s.waitStartup(ctx, probe.name, probe.ip); err != nil {
			return pt, fmt.Errorf("%s at %d services: %w", p, pt.services, err)
		}
	}
	if err := sleep(ctx, 5*time.Second); err != nil {
		return pt, err
	}
	for _, s := range started {
		m, err := s.memory(ctx)
		if err != nil {
			return pt, err
		}
		if e := s.exited(); e != "" {
			return pt, fmt.Errorf("%s exited at %d services: %s", s.name, pt.services, e)
		}
		pt.mem[s.name] = m
		logf("%d services: %s RSS %s, heap %s", pt.services, s.name, mib(m.rss), mib(m.heap))
	}
	return pt, nil
}

// sizeSeries is the sweep with the main run's cluster (memory after sync) as its last point.
func (r *results) sizeSeries() []sizePoint {
	pts := slices.Clone(r.sizes)
	if m := r.memSync; r.cluster != nil && m["kubetree"].rss > 0 {
		pts = append(pts, sizePoint{
			services: len(r.cluster.services), endpoints: len(r.cluster.services) * r.cluster.endpoints,
			mem: map[string]mem{"kubernetes": m["kubernetes"], "kubetree": m["kubetree"]},
		})
	}
	return pts
}
