// Package wire reads what kubetree needs straight from the API server's protobuf: Services,
// EndpointSlices and pods decoded slim (the codecs), a watch stream's events decoded in place
// (WatchEvents), and metadata-only lists read as they stream in (ReadVersions, for the audit).
// It decodes into the model (internal/object) through the model's own constructors (StoreService,
// StoreSlice, PodStore.Store), the ones the transforms of objects decoded in full go through, so
// that one place makes the model of an object however it arrived. The model knows nothing of it.
package wire
