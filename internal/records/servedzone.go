package records

// ServedZone is one DNS zone of a server block, with its kind decided once, when the Corefile is
// read, rather than per query.
type ServedZone struct {
	Name         string // lower case, fully qualified
	Reverse      bool   // in-addr.arpa or ip6.arpa: PTR records from the reverse index
	Multicluster bool   // served from ServiceImports rather than Services
}
