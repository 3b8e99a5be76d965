package apiclient

import (
	"context"
	"errors"
	"net/http"
	"testing"

	authentication "k8s.io/api/authentication/v1"
	authorization "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// reviewingAPI is a fake API server that authenticates the token "alice" and "bob", and
// authorizes alice only, for /explain only; with down, it fails every review.
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
		attrs := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && attrs != nil && attrs.Path == "/explain" && attrs.Verb == "get"
		return true, sar, nil
	})
	return c, down
}

// TestReviewer: the API server authenticates the token and authorizes its user for GET on the
// path; a decision is kept (asking again costs the API server nothing), the API server's failure
// is not.
func TestReviewer(t *testing.T) {
	c, down := reviewingAPI()
	r := NewReviewer(c)
	ctx := context.Background()
	for _, tc := range []struct {
		token, path string
		want        int
	}{
		{"alice", "/explain", 0},
		{"alice", "/dump", http.StatusForbidden},
		{"bob", "/explain", http.StatusForbidden},
		{"mallory", "/explain", http.StatusUnauthorized},
	} {
		if got, why := r.Authorize(ctx, tc.token, tc.path); got != tc.want {
			t.Errorf("%s GET %s: %d (%s), want %d", tc.token, tc.path, got, why, tc.want)
		}
	}
	asked := len(c.Actions())
	if got, _ := r.Authorize(ctx, "mallory", "/explain"); got != http.StatusUnauthorized || len(c.Actions()) != asked {
		t.Errorf("asked again: %d, and %d more reviews; want the kept 401 and none", got, len(c.Actions())-asked)
	}
	*down = true
	if got, _ := r.Authorize(ctx, "carol", "/explain"); got != http.StatusServiceUnavailable {
		t.Errorf("the API server down: %d, want 503", got)
	}
	*down = false
	if got, _ := r.Authorize(ctx, "carol", "/explain"); got != http.StatusUnauthorized {
		t.Errorf("the API server back: %d, want 401 (a failure is not kept)", got)
	}
}
