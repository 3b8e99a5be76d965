package relist

import (
	"github.com/kubetree/kubetree/bench/internal/measure"
)

// Options are -relist's: the memory of a full relist.
type Options struct {
	measure.Common

	GoMemLimit  string // -gomemlimit: GOMEMLIMIT for the servers
	MemoryLimit string // -memory-limit: kubetree in a memory cgroup with this limit, e.g. 170Mi
	CPUHogs     int    // -cpu-hogs: busy loops beside the servers, for CPU contention
}
