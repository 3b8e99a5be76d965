package query

import "context"

// internalKey marks the context of an internal query: the self-probe's or explain's.
type internalKey struct{}

// internalQuery is how an internal query differs from a client's.
type internalQuery struct {
	// unisolated: isolation does not apply (the self-probe's: its client is kubetree itself).
	unisolated bool
	// hidden, when not nil, is set when isolation changed the answer (explain says so).
	hidden *bool
}

// Internal marks ctx as explain's query. It stays in kubetree, neither passed on to the next plugin
// (fallthrough) nor resolved upstream (an ExternalName's target); isolation applies to it as to the
// client it names, without counting in coredns_kubetree_isolated_total, and hidden (when not nil)
// is set when isolation changed its answer.
func Internal(ctx context.Context, hidden *bool) context.Context {
	return context.WithValue(ctx, internalKey{}, internalQuery{hidden: hidden})
}

// Probe marks ctx as the self-probe's query: internal, and isolation does not apply (its client
// is kubetree itself, which may resolve every name).
func Probe(ctx context.Context) context.Context {
	return context.WithValue(ctx, internalKey{}, internalQuery{unisolated: true})
}

// internalOf is ctx's internal query; ok is false for a client's.
func internalOf(ctx context.Context) (q internalQuery, ok bool) {
	q, ok = ctx.Value(internalKey{}).(internalQuery)
	return q, ok
}

// isInternal reports whether ctx is an internal query's.
func isInternal(ctx context.Context) bool {
	_, ok := internalOf(ctx)
	return ok
}
