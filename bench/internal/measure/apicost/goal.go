package apicost

import (
	"strings"
	"time"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// Intervals are the audit intervals the report computes hourly figures at.
var Intervals = []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 20 * time.Minute, 30 * time.Minute, 60 * time.Minute}

// Goal is the bound: a kubetree replica costs the API server at most this many
// times an in-tree replica per hour, in bytes and in CPU.
const Goal = 1.05

// IntervalList is Intervals, for the reports.
func IntervalList() string {
	var v []string
	for _, iv := range Intervals {
		v = append(v, measure.ShortDuration(iv))
	}
	return strings.Join(v, ", ")
}
