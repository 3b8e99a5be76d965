package apiclient

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	authentication "k8s.io/api/authentication/v1"
	authorization "k8s.io/api/authorization/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Reviewer decides, as kube-rbac-proxy does, whether the bearer of a token may GET a path of an
// HTTP endpoint of ours: the API server authenticates the token (TokenReview) and authorizes its
// user for the non-resource URL (SubjectAccessReview, verb get). A decision is kept for a while,
// so that a client asking again, or many asking with one bad token, costs the API server once.
type Reviewer struct {
	client kubernetes.Interface
	mu     sync.Mutex
	kept   map[reviewKey]review
}

type reviewKey struct {
	token [sha256.Size]byte // not the token itself
	path  string
}

type review struct {
	status int
	why    string
	until  time.Time
}

// How long a decision is kept, and how many at most (past that, all are dropped).
const (
	reviewKept    = 10 * time.Second
	reviewsKept   = 1024
	reviewTimeout = 5 * time.Second
)

// NewReviewer reviews through client.
func NewReviewer(client kubernetes.Interface) *Reviewer {
	return &Reviewer{client: client, kept: map[reviewKey]review{}}
}

// Authorize reports whether the bearer of token may GET path: status 0 when it may, else the
// HTTP status to answer (401 not authenticated, 403 not authorized, 503 the API server could not
// say), and why.
func (r *Reviewer) Authorize(ctx context.Context, token, path string) (status int, why string) {
	key := reviewKey{sha256.Sum256([]byte(token)), path}
	now := time.Now()
	r.mu.Lock()
	if d, ok := r.kept[key]; ok && now.Before(d.until) {
		r.mu.Unlock()
		return d.status, d.why
	}
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	status, why = r.review(ctx, token, path)
	if status == http.StatusServiceUnavailable {
		return status, why // the API server's trouble: ask again next time
	}
	r.mu.Lock()
	if len(r.kept) >= reviewsKept {
		clear(r.kept)
	}
	r.kept[key] = review{status: status, why: why, until: now.Add(reviewKept)}
	r.mu.Unlock()
	return status, why
}

func (r *Reviewer) review(ctx context.Context, token, path string) (int, string) {
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authentication.TokenReview{Spec: authentication.TokenReviewSpec{Token: token}}, meta.CreateOptions{})
	if err != nil {
		return http.StatusServiceUnavailable, "TokenReview: " + err.Error()
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "the API server does not authenticate the token"
	}
	u := tr.Status.User
	extra := map[string]authorization.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorization.ExtraValue(v)
	}
	sar, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorization.SubjectAccessReview{
		Spec: authorization.SubjectAccessReviewSpec{User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			NonResourceAttributes: &authorization.NonResourceAttributes{Path: path, Verb: "get"}},
	}, meta.CreateOptions{})
	if err != nil {
		return http.StatusServiceUnavailable, "SubjectAccessReview: " + err.Error()
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, u.Username + " may not get " + path + " (a ClusterRole with nonResourceURLs [" + path + "], verbs [get])"
	}
	return 0, ""
}
