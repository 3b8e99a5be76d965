// Package object is kubetree's model of the cluster: the slim forms of Services, EndpointSlices,
// Namespaces, Pods, Nodes and ServiceImports that the informers keep (the transforms and the
// protobuf codecs make them), Assemble that puts a service's model together, and the indexes of
// stored objects (slices by service, pods by address, zones by node). It also reads the API
// server's protobuf watch streams and metadata-only lists. It knows client-go's types and nothing
// of DNS records; CoreDNS's plugin/kubernetes/object is its model.
package object
