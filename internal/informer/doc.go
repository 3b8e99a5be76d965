// Package informer keeps one resource's objects current from the API server, as client-go's shared
// informer does (contract_test.go checks where it claims to), for a controller to build on: the
// informer and the store it hands changes from (informer.go, handingstore.go, store.go), the watch
// stream read by a goroutine of its own through a slim client (watchstream.go, slimclient.go), the
// lists' collector setting (relist.go), and a queue of keys with client-go's workqueue semantics
// (queue.go). It knows client-go, the API client and the wire's watch event reader, and nothing of
// the model or of DNS: what an object becomes is the transform's and the codec's it is given.
package informer
