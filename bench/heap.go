package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// The model's heap at 100k services and 1M endpoints, through the informer path without an API
// server (the root package's BenchmarkScale), beside the figure before external names, zonal and
// multicluster were added: data for features a cluster does not use must not cost it memory.

// heapBaseline is BenchmarkScale's heap at heapServices x heapEndpoints at commit 0dc6234, the last
// one before external names, zonal names and multicluster.
const (
	heapBaselineMiB = 159.8
	heapBaseline    = "0dc6234"
	heapServices    = 100000
	heapEndpoints   = 10
)

// modelHeap is one BenchmarkScale run's figures.
type modelHeap struct {
	heapMiB, perService, perEndpoint float64
}

// measureModelHeap runs BenchmarkScale in the repository at root.
func measureModelHeap(ctx context.Context, root string) (*modelHeap, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout=30m", "-run=^$", "-bench=^BenchmarkScale$", "-benchtime=1x", ".",
		"-args", fmt.Sprintf("-scale.services=%d", heapServices), fmt.Sprintf("-scale.endpoints=%d", heapEndpoints), "-scale.updates=1000")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("BenchmarkScale: %v\n%s", err, out)
	}
	return parseModelHeap(string(out))
}

// parseModelHeap reads the benchmark line's custom metrics: "159.8 heap-MiB", "755.7 B/service", ...
func parseModelHeap(out string) (*modelHeap, error) {
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "BenchmarkScale") {
			continue
		}
		f := strings.Fields(line)
		h := &modelHeap{}
		units := map[string]*float64{"heap-MiB": &h.heapMiB, "B/service": &h.perService, "B/endpoint": &h.perEndpoint}
		found := 0
		for i := 1; i < len(f); i++ {
			if dst, ok := units[f[i]]; ok {
				v, err := strconv.ParseFloat(f[i-1], 64)
				if err != nil {
					return nil, fmt.Errorf("BenchmarkScale %s: %v", f[i], err)
				}
				*dst = v
				found++
			}
		}
		if found == len(units) {
			return h, nil
		}
	}
	return nil, fmt.Errorf("no BenchmarkScale line with heap-MiB, B/service and B/endpoint in:\n%s", out)
}

func (h *modelHeap) markdown() string {
	return fmt.Sprintf("## Model heap at %dk services and %dM endpoints\n\n"+
		"kubetree's Go heap after loading %d services of %d endpoints each through the informer path, without an API\n"+
		"server (`BenchmarkScale`, `make scale`), none of them using external names, zonal names or multicluster:\n\n"+
		"| | heap | per service | per endpoint |\n| --- | ---: | ---: | ---: |\n"+
		"| this run | %.1f MiB | %.0f B | %.1f B |\n| at %s, before those features | %.1f MiB | | |\n| ratio | %.3f | | |\n\n",
		heapServices/1000, heapServices*heapEndpoints/1000000, heapServices, heapEndpoints,
		h.heapMiB, h.perService, h.perEndpoint, heapBaseline, heapBaselineMiB, h.heapMiB/heapBaselineMiB)
}
