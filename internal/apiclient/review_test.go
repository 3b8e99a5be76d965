package apiclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	authentication "k8s.io/api/authentication/v1"
	authorization "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
)

// reviewingAPI is a fake API server that authenticates the tokens "alice" and "bob", and lets
// alice get kubetree's names in namespace shop only; with down, it fails every review.
func reviewingAPI() (*fake.Clientset, *bool) {
	c := fake.NewClientset()
	down := new(bool)
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if *down {
			return true, nil, errors.New("connection refused")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authentication.TokenReview).DeepCopy()
		if token := tr.Spec.Token; token == "alice" || token == "bob" {
			tr.Status = authentication.TokenReviewStatus{Authenticated: true,
				User: authentication.UserInfo{Username: token, Groups: []string{"system:authenticated"}}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorization.SubjectAccessReview).DeepCopy()
		attrs := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && attrs != nil && attrs.Group == Group && attrs.Resource == Resource &&
			attrs.Verb == "get" && attrs.Namespace == "shop"
		return true, sar, nil
	})
	return c, down
}

var (
	source = netip.MustParseAddr("10.0.0.7")
	bg     = context.Background()
)

// TestReviewer: the API server authenticates the token and authorizes its user to get kubetree's
// names of a namespace; a decision is kept (asking again costs the API server nothing), the API
// server's failure is not.
func TestReviewer(t *testing.T) {
	c, down := reviewingAPI()
	r := newReviewer(c)
	for _, tc := range []struct {
		token, verb, ns string
		want            int
	}{
		{"alice", "get", "shop", 0},
		{"alice", "get", "bank", http.StatusForbidden},
		{"alice", "list", "shop", http.StatusForbidden},
		{"alice", "get", "", http.StatusForbidden},
		{"bob", "get", "shop", http.StatusForbidden},
		{"mallory", "get", "shop", http.StatusUnauthorized},
	} {
		if got, why := r.Authorize(bg, source, tc.token, tc.verb, tc.ns); got != tc.want {
			t.Errorf("%s %s in %q: %d (%s), want %d", tc.token, tc.verb, tc.ns, got, why, tc.want)
		}
	}
	asked := len(c.Actions())
	for _, token := range []string{"mallory", "alice"} {
		r.Authorize(bg, source, token, "get", "shop")
	}
	if len(c.Actions()) != asked {
		t.Errorf("asked again: %d more reviews; want the kept decisions and none", len(c.Actions())-asked)
	}
	*down = true
	if got, _ := r.Authenticate(bg, source, "carol"); got != http.StatusServiceUnavailable {
		t.Errorf("the API server down: %d, want 503", got)
	}
	*down = false
	if got, _ := r.Authenticate(bg, source, "carol"); got != http.StatusUnauthorized {
		t.Errorf("the API server back: %d, want 401 (a failure is not kept)", got)
	}
}

// TestReviewerUnderAFloodOfBadTokens: one source sends a fresh bad token again and again; its
// reviews are admitted at its own rate only (the rest answered 503 at once, without waiting), its
// bad tokens never push out the decision kept for a reader's good one, and a reader at another
// source, whose decision is not kept, is reviewed.
func TestReviewerUnderAFloodOfBadTokens(t *testing.T) {
	defer func(k int) { keptMax = k }(keptMax)
	keptMax = 64
	c, _ := reviewingAPI()
	r := newReviewer(c)
	now := time.Unix(1e9, 0)
	r.now = func() time.Time { return now }
	flood, reader, other := netip.MustParseAddr("10.0.9.9"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	if got, why := r.Authorize(bg, reader, "alice", "get", "shop"); got != 0 {
		t.Fatalf("the reader before the flood: %d %s", got, why)
	}
	admitted, busy := 0, 0
	for i := range 20 * keptMax {
		if i%100 == 0 {
			now = now.Add(time.Second) // 100 tries a second from the flooding source
		}
		switch got, _ := r.Authenticate(bg, flood, fmt.Sprintf("bad-%d", i)); got {
		case http.StatusUnauthorized:
			admitted++
		case http.StatusServiceUnavailable:
			busy++
		default:
			t.Fatalf("a bad token: %d", got)
		}
		if i == keptMax*10 {
			asked := len(c.Actions())
			if got, why := r.Authorize(bg, reader, "alice", "get", "shop"); got != 0 || len(c.Actions()) != asked {
				t.Fatalf("the reader in the flood: %d %s, %d reviews; want its kept decision", got, why, len(c.Actions())-asked)
			}
		}
	}
	seconds := 20 * keptMax / 100
	if max := sourceBurst + seconds*int(sourceRate); admitted > max {
		t.Errorf("the flooding source had %d reviews in %d s, want at most %d (its burst, then %v a second)", admitted, seconds, max, sourceRate)
	}
	if busy == 0 {
		t.Error("no try of the flooding source was refused")
	}
	if got, why := r.Authorize(bg, other, "alice", "get", "shop"); got != 0 {
		t.Errorf("a reader at another source, in the flood: %d %s, want reviewed and allowed", got, why)
	}
}

// TestReviewerHasAClientOfItsOwn: the Reviewer's client is made from a copy of the configuration
// it is given, without its rate limiter: a review never waits on (nor takes from) the limiter of
// the client that configuration came from.
func TestReviewerHasAClientOfItsOwn(t *testing.T) {
	limiter := &countingLimiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(5, 10)}
	rc := &rest.Config{Host: "http://127.0.0.1:1", RateLimiter: limiter, QPS: 5, Burst: 10}
	r, err := NewReviewer(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	r.Authenticate(ctx, source, "alice") // refused by nothing listening: 503
	if n := limiter.used.Load(); n != 0 {
		t.Errorf("the given configuration's limiter was used %d times by a review, want 0", n)
	}
	if rc.RateLimiter != limiter {
		t.Error("NewReviewer changed the configuration it was given")
	}
}

type countingLimiter struct {
	flowcontrol.RateLimiter
	used atomic.Int64
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.used.Add(1)
	return l.RateLimiter.Wait(ctx)
}
func (l *countingLimiter) TryAccept() bool { l.used.Add(1); return l.RateLimiter.TryAccept() }
func (l *countingLimiter) Accept()         { l.used.Add(1); l.RateLimiter.Accept() }
