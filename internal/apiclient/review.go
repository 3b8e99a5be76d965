package apiclient

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authentication "k8s.io/api/authentication/v1"
	authorization "k8s.io/api/authorization/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Reviewer decides, as kube-rbac-proxy does, for a caller of an HTTP endpoint of ours that brings a
// bearer token: who it is (TokenReview) and whether it may read kubetree's names of a namespace
// (SubjectAccessReview).
//
// Reviews are asked of the API server by anyone who can reach the endpoint, so they must cost the
// rest of kubetree nothing and a flood of them little. They go through a client of their own (its
// own connection, and no client-go rate limiter, whose Wait would hold every request that waits):
// the watch's client and its limiter never carry a review. A review that no decision kept answers
// is asked only when the caller's source and all sources together have room (a token bucket
// each); otherwise the caller is answered at once (503, to try again) and holds nothing. Decisions
// are kept for reviewKept: a caller asking again, or many asking with one token, costs the API
// server once. Bad tokens are kept apart from good ones, so that a flood of fresh bad tokens,
// which fills its own store, never pushes a reader's decision out.
type Reviewer struct {
	client kubernetes.Interface
	close  func()

	mu      sync.Mutex
	all     *rate.Limiter
	sources map[netip.Addr]*rate.Limiter
	users   map[tokenKey]identity // authenticated tokens
	bad     map[tokenKey]time.Time
	grants  map[grantKey]decision
	now     func() time.Time
}

type tokenKey [sha256.Size]byte // the token's hash, not the token

// identity is who the API server says a token is, until when we keep it.
type identity struct {
	user  authentication.UserInfo
	until time.Time
}

type grantKey struct {
	token          tokenKey
	verb, resource string
	namespace      string
}

type decision struct {
	allowed bool
	reason  string
	until   time.Time
}

// Bounds of the reviews (variables, not constants, so that the package's tests can change them).
var (
	reviewKept = 10 * time.Second
	// reviewRate is how many reviews (a TokenReview or a SubjectAccessReview) a second all callers
	// together may have asked, with reviewBurst at once; sourceRate and sourceBurst those of one
	// source address.
	reviewRate, reviewBurst = rate.Limit(50), 50
	sourceRate, sourceBurst = rate.Limit(5), 10
	// Each store holds at most keptMax entries; past that, its expired ones go, then all of it.
	keptMax       = 4096
	reviewTimeout = 5 * time.Second
)

// Group and Resource name what a caller is asked to be allowed, in RBAC's words: the names
// kubetree serves, of a namespace (or of every namespace, cluster-wide). The resource is not
// served by the API server; RBAC grants it like any other.
const (
	Group    = "kubetree.io"
	Resource = "names"
)

// NewReviewer reviews through a client of its own, made from rc (a configuration of its own:
// apiclient.Config's, not the watch's).
func NewReviewer(rc *rest.Config) (*Reviewer, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst, rc.RateLimiter = -1, 0, nil // no client-go limiter: the Reviewer admits reviews itself, without waiting
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	r := newReviewer(client)
	r.close = func() { Close(rc) }
	return r, nil
}

func newReviewer(client kubernetes.Interface) *Reviewer {
	return &Reviewer{client: client, all: rate.NewLimiter(reviewRate, reviewBurst), sources: map[netip.Addr]*rate.Limiter{},
		users: map[tokenKey]identity{}, bad: map[tokenKey]time.Time{}, grants: map[grantKey]decision{}, now: time.Now}
}

// Close closes the Reviewer's connections to the API server.
func (r *Reviewer) Close() {
	if r.close != nil {
		r.close()
	}
}

// Authenticate reports whether the API server authenticates token, brought by a caller at source:
// status 0 when it does, else the HTTP status to answer (401 not authenticated, 503 the API server
// could not say, or no room for a review now), and why.
func (r *Reviewer) Authenticate(ctx context.Context, source netip.Addr, token string) (status int, why string) {
	_, status, why = r.identity(ctx, source, sha256.Sum256([]byte(token)), token)
	return status, why
}

// Authorize reports whether the bearer of token may verb (get, list) kubetree's names in
// namespace ns ("": in every namespace): status 0 when it may, else 401, 403 (not allowed) or 503,
// and why.
func (r *Reviewer) Authorize(ctx context.Context, source netip.Addr, token, verb, ns string) (status int, why string) {
	key := sha256.Sum256([]byte(token))
	user, status, why := r.identity(ctx, source, key, token)
	if status != 0 {
		return status, why
	}
	gk := grantKey{token: key, verb: verb, resource: Resource, namespace: ns}
	r.mu.Lock()
	d, ok := r.grants[gk]
	ok = ok && r.now().Before(d.until)
	admitted := ok || r.admit(source)
	r.mu.Unlock()
	if !admitted {
		return busy()
	}
	if !ok {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		extra := map[string]authorization.ExtraValue{}
		for k, v := range user.Extra {
			extra[k] = authorization.ExtraValue(v)
		}
		sar, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorization.SubjectAccessReview{
			Spec: authorization.SubjectAccessReviewSpec{User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
				ResourceAttributes: &authorization.ResourceAttributes{Namespace: ns, Verb: verb, Group: Group, Resource: Resource}},
		}, meta.CreateOptions{})
		if err != nil {
			return http.StatusServiceUnavailable, "SubjectAccessReview: " + err.Error()
		}
		d = decision{allowed: sar.Status.Allowed, reason: sar.Status.Reason, until: r.now().Add(reviewKept)}
		r.mu.Lock()
		keep(r.grants, gk, d, r.now(), func(d decision) time.Time { return d.until })
		r.mu.Unlock()
	}
	if !d.allowed {
		return http.StatusForbidden, Forbidden(user.Username, verb, ns)
	}
	return 0, ""
}

// Forbidden says what user lacks to verb kubetree's names in namespace ns, and how it is granted.
func Forbidden(user, verb, ns string) string {
	if ns == "" {
		return user + " may not " + verb + " " + Resource + "." + Group + " cluster-wide: bind the ClusterRole kubetree:explain-reader to it with a ClusterRoleBinding"
	}
	return user + " may not " + verb + " " + Resource + "." + Group + " in namespace " + ns +
		": bind the ClusterRole kubetree:explain-reader to it with a RoleBinding in " + ns + " (or a ClusterRoleBinding, for every namespace)"
}

// identity is who token (of hash key) is: kept, or asked of the API server when there is room.
func (r *Reviewer) identity(ctx context.Context, source netip.Addr, key tokenKey, token string) (authentication.UserInfo, int, string) {
	now := r.now()
	r.mu.Lock()
	if id, ok := r.users[key]; ok && now.Before(id.until) {
		r.mu.Unlock()
		return id.user, 0, ""
	}
	if until, ok := r.bad[key]; ok && now.Before(until) {
		r.mu.Unlock()
		return authentication.UserInfo{}, http.StatusUnauthorized, notAuthenticated
	}
	admitted := r.admit(source)
	r.mu.Unlock()
	if !admitted {
		status, why := busy()
		return authentication.UserInfo{}, status, why
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authentication.TokenReview{Spec: authentication.TokenReviewSpec{Token: token}}, meta.CreateOptions{})
	if err != nil {
		return authentication.UserInfo{}, http.StatusServiceUnavailable, "TokenReview: " + err.Error()
	}
	now = r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !tr.Status.Authenticated {
		keep(r.bad, key, now.Add(reviewKept), now, func(t time.Time) time.Time { return t })
		return authentication.UserInfo{}, http.StatusUnauthorized, notAuthenticated
	}
	keep(r.users, key, identity{user: tr.Status.User, until: now.Add(reviewKept)}, now, func(id identity) time.Time { return id.until })
	return tr.Status.User, 0, ""
}

const notAuthenticated = "the API server does not authenticate the token"

// admit takes a review's place from source's bucket and from all sources' (r.mu held): false when
// either is empty, and the caller is answered at once.
func (r *Reviewer) admit(source netip.Addr) bool {
	now := r.now()
	s := r.sources[source]
	if s == nil {
		if len(r.sources) >= keptMax {
			for a, l := range r.sources {
				if l.TokensAt(now) >= float64(sourceBurst) {
					delete(r.sources, a) // full again: as good as new
				}
			}
			if len(r.sources) >= keptMax {
				clear(r.sources)
			}
		}
		s = rate.NewLimiter(sourceRate, sourceBurst)
		r.sources[source] = s
	}
	if s.TokensAt(now) < 1 || !r.all.AllowN(now, 1) {
		return false
	}
	return s.AllowN(now, 1)
}

func busy() (int, string) {
	return http.StatusServiceUnavailable, "too many reviews of tokens at once: try again"
}

// keep stores v under k in m, first making room: expired entries go, then, if m is still full,
// all of them.
func keep[K comparable, V any](m map[K]V, k K, v V, now time.Time, until func(V) time.Time) {
	if len(m) >= keptMax {
		for k, v := range m {
			if !now.Before(until(v)) {
				delete(m, k)
			}
		}
		if len(m) >= keptMax {
			clear(m)
		}
	}
	m[k] = v
}
