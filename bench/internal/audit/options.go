package audit

import (
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// Options are -audit's: what kubetree's audit costs the API server.
type Options struct {
	measure.Common
	apicost.AuditPlan // -audits, -audit-interval

	Before string        // -audit-before: a bin/coredns built before the metadata-only audit, measured beside
	Idle   time.Duration // -audit-idle: the in-tree plugin idling, for its watch traffic and the API server's idle CPU
}
