package sidebyside

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// The model's heap at 100k services and 1M endpoints, through the informer path without an API
// server (test/perf's BenchmarkScale), beside the figure before external names, zonal and
// multicluster were added: data for features a cluster does not use must not cost it memory.

// heapBaseline is BenchmarkScale's heap at heapServices x heapEndpoints at commit 0dc6234, the last
// one before external names, zonal names and multicluster.
const (
	heapBaselineMiB = 159.8
	heapBaseline    = "0dc6234"
	heapServices    = 100000
	heapEndpoints   = 10
)

// topologyNodes are the node counts of the two runs with topology on: the heap's growth between
// them is the cost of a node, and what is left above the run with every option off is the cost of
// the endpoints' topology.
var topologyNodes = [2]int{3000, 9000}

// modelHeap is one BenchmarkScale run's figures, and with topology on, what it adds.
type modelHeap struct {
	heapMiB, perService, perEndpoint float64
	topology                         *topologyHeap
}

// topologyHeap is the heap with topology on (pods verified without pods, every endpoint on a node
// and hinted for its zone) at topologyNodes nodes.
type topologyHeap struct {
	heapMiB              [2]float64
	perNode, perEndpoint float64 // bytes the option adds
}

// measureModelHeap runs BenchmarkScale in the repository at root with every option off, then
// with topology on at each of topologyNodes.
func measureModelHeap(ctx context.Context, root string) (*modelHeap, error) {
	h, err := runScale(ctx, root)
	if err != nil {
		return nil, err
	}
	t := &topologyHeap{}
	for i, n := range topologyNodes {
		on, err := runScale(ctx, root, "-scale.topology", fmt.Sprintf("-scale.nodes=%d", n))
		if err != nil {
			return nil, err
		}
		t.heapMiB[i] = on.heapMiB
	}
	const mib = 1 << 20
	t.perNode = (t.heapMiB[1] - t.heapMiB[0]) * mib / float64(topologyNodes[1]-topologyNodes[0])
	t.perEndpoint = ((t.heapMiB[0]-h.heapMiB)*mib - t.perNode*float64(topologyNodes[0])) / (heapServices * heapEndpoints)
	h.topology = t
	return h, nil
}

// runScale runs BenchmarkScale once at heapServices x heapEndpoints, with the benchmark's flags.
func runScale(ctx context.Context, root string, flags ...string) (*modelHeap, error) {
	args := []string{"test", "-count=1", "-timeout=30m", "-run=^$", "-bench=^BenchmarkScale$", "-benchtime=1x", "./test/perf",
		"-args", fmt.Sprintf("-scale.services=%d", heapServices), fmt.Sprintf("-scale.endpoints=%d", heapEndpoints), "-scale.updates=1000"}
	cmd := exec.CommandContext(ctx, "go", append(args, flags...)...)
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

// log prints the figures.
func (h *modelHeap) log() {
	measure.Logf("model heap: %.1f MiB (%.3f of %.1f MiB at %s)", h.heapMiB, h.heapMiB/heapBaselineMiB, heapBaselineMiB, heapBaseline)
	measure.Logf("model heap with topology: %.1f MiB at %d nodes, %.1f MiB at %d: %.0f B per node, %.1f B per endpoint",
		h.topology.heapMiB[0], topologyNodes[0], h.topology.heapMiB[1], topologyNodes[1], h.topology.perNode, h.topology.perEndpoint)
}

func (h *modelHeap) markdown() string {
	return h.offMarkdown() + h.topology.markdown()
}

func (h *modelHeap) offMarkdown() string {
	return fmt.Sprintf("## Model heap at %dk services and %dM endpoints\n\n"+
		"kubetree's Go heap after loading %d services of %d endpoints each through the informer path, without an API\n"+
		"server (`BenchmarkScale`, `make scale`), none of them using external names, zonal names or multicluster:\n\n"+
		"| | heap | per service | per endpoint |\n| --- | ---: | ---: | ---: |\n"+
		"| this run | %.1f MiB | %.0f B | %.1f B |\n| at %s, before those features | %.1f MiB | | |\n| ratio | %.3f | | |\n\n",
		heapServices/1000, heapServices*heapEndpoints/1000000, heapServices, heapEndpoints,
		h.heapMiB, h.perService, h.perEndpoint, heapBaseline, heapBaselineMiB, h.heapMiB/heapBaselineMiB)
}

func (t *topologyHeap) markdown() string {
	if t == nil {
		return ""
	}
	return fmt.Sprintf("With `topology` on (and `pods verified`, no pods), every endpoint on a node and hinted for its zone "+
		"(`make scale SCALE_FLAGS='-scale.topology -scale.nodes=N'`):\n\n"+
		"| nodes | heap |\n| ---: | ---: |\n| %d | %.1f MiB |\n| %d | %.1f MiB |\n\n"+
		"What the option adds: %.0f B per node, %.1f B per endpoint.\n\n",
		topologyNodes[0], t.heapMiB[0], topologyNodes[1], t.heapMiB[1], t.perNode, t.perEndpoint)
}
