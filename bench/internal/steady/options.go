package steady

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// Options are -steady's: what a replica costs the API server under steady churn.
type Options struct {
	measure.Common
	apicost.AuditPlan // -audits, -audit-interval

	Rate     int           // -steady-rate: EndpointSlice updates a second
	Window   time.Duration // -steady-window: one server's window
	Settle   time.Duration // -steady-settle: from a server's first right answer to its window
	Rounds   int           // -steady-rounds: rounds of every server and none
	Kubetree []Server      // -steady-kubetree: further kubetree builds
	Replicas int           // -steady-replicas: replicas of a server in its window
}
