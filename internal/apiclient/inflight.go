package apiclient

import "net/http"

// maxInflight is the apiserver_max_inflight option, with the in-tree plugin's meaning: at most max
// requests to the API server are started at once (a watch holds its place only until its response
// begins), counted across every client of the instance that it wraps. 0: no limit.
func maxInflight(max int) func(http.RoundTripper) http.RoundTripper {
	if max <= 0 {
		return func(next http.RoundTripper) http.RoundTripper { return next }
	}
	slots := make(chan struct{}, max)
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				return next.RoundTrip(r)
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
