package object

import "slices"

// Assemble puts a service's model together from what the informers store of the Service and of
// its EndpointSlices: the one place that does, for the write side (internal/applier), explain, the
// tests, the fuzzers and the benchmarks alike. problems are the parts left out of DNS; the model is
// nil when the service's own name cannot be served.
func Assemble(svc *StoredService, sls []*StoredSlice) (*Service, []Problem) {
	problems := slices.Clip(svc.Problems()) // appending must not write into the stored object
	var models []*EndpointSlice
	for _, sl := range sls {
		problems = append(problems, sl.Problems()...)
		if sl.Model != nil {
			models = append(models, sl.Model)
		}
	}
	if svc.Model == nil {
		return nil, problems
	}
	m := *svc.Model
	if m.Kind != ExternalName {
		m.Slices = models
	}
	return &m, problems
}
