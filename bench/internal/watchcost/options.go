package watchcost

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// Options are -watch-cost's: what one plain EndpointSlice watch costs the API server per
// event, and kubetree's audit.
type Options struct {
	measure.Common
	apicost.AuditPlan // -audits, -audit-interval

	Watches int           // -watch-cost: watches in a window
	Rate    int           // -steady-rate: EndpointSlice updates a second
	Window  time.Duration // -steady-window: one window
	Settle  time.Duration // -steady-settle: from the watches' opening to their window
	Rounds  int           // -steady-rounds: rounds of each protocol and none
}
