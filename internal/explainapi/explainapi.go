// Package explainapi is the HTTP API of the explain option's /explain and /dump: the JSON types
// they write, the reasons an explanation gives, the paging header and limits, and the defaults.
// The endpoint (internal/explain) writes it and the kubectl plugin (cmd/kubectl-kubetree) reads
// it; it imports nothing of the plugin, CoreDNS or client-go, so that the plugin's binary does not
// carry them. docs/operations.md, "Explain and dump", documents the fields.
package explainapi

import "net/netip"

// DefaultAddr is the explain listener's address when the explain option names none.
const DefaultAddr = "127.0.0.1:9155"

// DefaultClient is the client an explanation assumes when not told one: no pod has it.
var DefaultClient = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// Reasons an explanation gives, in its reason field: short and stable, for scripts and tests.
const (
	ReasonOutsideZones   = "outside-zones"
	ReasonNotSynced      = "not-synced"
	ReasonService        = "service"
	ReasonEndpoint       = "endpoint"
	ReasonSRV            = "srv"
	ReasonNoData         = "nodata"
	ReasonZoneRecords    = "zone-records"
	ReasonNamespace      = "namespace"
	ReasonInterior       = "interior"
	ReasonReverse        = "reverse"
	ReasonPod            = "pod"
	ReasonNoSuchAddress  = "no-such-address"
	ReasonNoSuchName     = "no-such-name" // below a service: no endpoint or port of that name
	ReasonNoSuchService  = "no-such-service"
	ReasonNoSuchNS       = "no-such-namespace"
	ReasonNSFiltered     = "namespace-filtered"     // not among namespaces
	ReasonNSNotSelected  = "namespace-not-selected" // not matched by namespace_labels
	ReasonLabelsFiltered = "labels-filtered"        // not matched by labels
	ReasonRejected       = "rejected"
	ReasonNoReady        = "headless-without-ready-endpoints"
	ReasonEmptyIgnored   = "empty-service-ignored"
	ReasonPending        = "pending" // stored, not yet applied
	ReasonPodsDisabled   = "pods-disabled"
	ReasonNoSuchPod      = "no-such-pod"
	ReasonNotClusterName = "not-a-cluster-name"
	ReasonIsolated       = "isolated" // isolate hides the name, or some of an address's owners, from the client
)

// Explanation is the explain endpoint's answer; docs/operations.md, "Explain and dump", documents its fields.
type Explanation struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Server string   `json:"server"`
	Client Client   `json:"client"`
	Rcode  string   `json:"rcode,omitempty"` // "" when kubetree does not answer (outside-zones)
	Answer []string `json:"answer"`
	Ns     []string `json:"ns"`
	Extra  []string `json:"extra"`
	Next   bool     `json:"fallthrough,omitempty"` // ServeDNS passes the query to the next plugin
	Reason string   `json:"reason"`
	Why    string   `json:"why"`
	From   []Object `json:"from,omitempty"`
	// Problems are the parts of these objects left out of DNS (the model's Problems).
	Problems []Problem `json:"problems,omitempty"`
}

// Client is the client the answer was made for: the address, and with pods verified the
// pod that address identifies.
type Client struct {
	Address string `json:"address"`
	Pod     string `json:"pod,omitempty"` // namespace/name
}

// Object is an API object as kubetree holds it.
type Object struct {
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// Problem is a part of an object left out of DNS, and why.
type Problem struct {
	Object          string `json:"object"`
	ResourceVersion string `json:"resourceVersion"`
	Text            string `json:"text"`
}

// DumpedName is one line of the dump; docs/operations.md, "Explain and dump", documents its fields.
type DumpedName struct {
	Name    string   `json:"name"`
	Types   []string `json:"types"`   // the types it has records of; none for a name without records
	Records int      `json:"records"` // how many
	// Truncated: a type has more records than a reply carries over TCP (64 KB); Records counts
	// those a query gets, as a query would.
	Truncated bool     `json:"truncated,omitempty"`
	From      []Object `json:"from,omitempty"`
}

// The names a page of the dump holds: without limit=, and at most.
const (
	DefaultDumpLimit = 1000
	MaxDumpLimit     = 10000
)

// NextHeader names the cursor of the next page of a paged dump; it is absent after the last.
const NextHeader = "Kubetree-Next-After"
