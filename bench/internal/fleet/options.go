package fleet

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// Options are -fleet's: a relist storm of N replicas of each plugin.
type Options struct {
	measure.Common

	Replicas    int           // -fleet: replicas of each plugin
	Plugins     []string      // -fleet-plugins: whose storms, in order
	Churn       int           // -churn: EndpointSlice updates a second throughout
	Steady      time.Duration // -fleet-steady: before the restart
	After       time.Duration // -fleet-after: after every replica caught up
	LimitInTree string        // -fleet-limit-in-tree: the in-tree plugin's memory cgroup limit
	MemGuard    float64       // -mem-guard: stop when the machine's memory in use passes this many bytes
	MemoryLimit string        // -memory-limit: kubetree's memory cgroup limit
	GoMemLimit  string        // -gomemlimit: kubetree's GOMEMLIMIT
}
