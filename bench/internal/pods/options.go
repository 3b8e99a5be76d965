package pods

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// Options are -pods': the pod dimension.
type Options struct {
	measure.Common
	measure.DnsperfFlags // -c, -q

	Pods       []int         // -pods: the pod counts to measure at, growing
	Churn      int           // -pod-churn: pod status changes to time
	Profile    bool          // -profile: a CPU profile of each server during the status changes
	ProfileDir string        // -profile-dir
	Rounds     int           // -rounds: autopath dnsperf rounds
	Duration   time.Duration // -duration: one dnsperf run
}
