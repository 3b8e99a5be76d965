// Package object is kubetree's model of the cluster: the slim forms of Services, EndpointSlices,
// Namespaces, Pods, Nodes and ServiceImports that the informers keep (the transforms make them, of
// objects decoded in full or of the fields internal/wire decodes from protobuf), Assemble that puts
// a service's model together, and the indexes queries read (pods by address, zones by node). It knows client-go's types
// and nothing of DNS records, nor of the wire; CoreDNS's plugin/kubernetes/object is its model.
package object
