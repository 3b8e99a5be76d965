package sidebyside

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// Options are the side-by-side run's (the default).
type Options struct {
	measure.Common
	measure.DnsperfFlags // -c, -q

	Sizes        []int         // -sizes: service counts at which both plugins' memory is also measured
	Rounds       int           // -rounds: dnsperf rounds, each of every server
	Duration     time.Duration // -duration: one dnsperf run
	Warmup       time.Duration // -warmup: an unrecorded dnsperf run per server before the rounds
	Queries      int           // -queries: lines in the query file
	Sample       int           // -sample: query-file questions in the correctness check
	Propagation  int           // -propagation: services created and deleted, one at a time
	StartTrials  int           // -start-trials: start-up measurements per plugin
	Seed         uint64        // -seed: of the query file and the sample
	Mix          string        // -mix: the query file's kinds (Mixes)
	SliceUpdates int           // -slice-updates: EndpointSlice updates timed
	Profile      bool          // -profile: a CPU profile of each server in the first load round and during the updates
	ProfileDir   string        // -profile-dir
	ModelHeap    bool          // -model-heap: also the model's heap at 1M endpoints (BenchmarkScale)
}
