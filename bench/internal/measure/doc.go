// Package measure is the bench's measuring code, shared by its experiments: the control plane
// (hack/cluster.sh) and the API server's own metrics, the synthetic cluster and its EndpointSlices,
// CoreDNS processes with their Corefiles, memory, CPU and metrics, memory cgroups, a proxy that
// counts what the API server sends, DNS queries and dnsperf, and the helpers every report uses.
//
// An experiment's options embed Common; the settings of the servers it starts (CoreDNSBinary,
// ServerBinary, ServerCgroup, ...) are package variables that it sets before it starts them, one
// experiment running per process.
package measure
