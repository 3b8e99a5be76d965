package query

import "context"

// internalKey marks the context of an internal query: the self-probe's or explain's.
type internalKey struct{}

// Internal marks ctx as an internal query's. Such a query stays in kubetree, neither passed on to
// the next plugin (fallthrough) nor resolved upstream (an ExternalName's target), and isolation
// does not apply to it. Checked only where a query would leave kubetree, and by isolation.
func Internal(ctx context.Context) context.Context {
	return context.WithValue(ctx, internalKey{}, true)
}

// isInternal reports whether ctx is an internal query's.
func isInternal(ctx context.Context) bool { return ctx.Value(internalKey{}) != nil }
