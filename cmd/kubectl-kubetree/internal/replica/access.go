package replica

import (
	"context"
	"fmt"

	authz "k8s.io/api/authorization/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Permission is one thing the plugin asks the API server to do: a verb on a resource, in a
// namespace ("": cluster-wide).
type Permission struct {
	Verb, Group, Resource, Subresource, Namespace string
}

func (p Permission) String() string {
	where := "cluster-wide"
	if p.Namespace != "" {
		where = "in namespace " + p.Namespace
	}
	return fmt.Sprintf("%s %s %s", p.Verb, p.resource(), where)
}

// resource is the resource as kubectl names it: RESOURCE[.GROUP][/SUBRESOURCE].
func (p Permission) resource() string {
	r := p.Resource
	if p.Group != "" {
		r += "." + p.Group
	}
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	return r
}

// ForwardPermission is what a port-forward to a pod of ns takes.
func ForwardPermission(ns string) Permission {
	return Permission{Verb: "create", Resource: "pods", Subresource: "portforward", Namespace: ns}
}

// NamesPermission is what reading kubetree's names of namespace ns ("": of every namespace) takes,
// as kubetree asks it of a caller off loopback: verb get to explain, list to dump. The ClusterRole
// kubetree:explain-reader (deploy/explain) grants both, bound in a namespace or cluster-wide.
func NamesPermission(verb, ns string) Permission {
	return Permission{Verb: verb, Group: "kubetree.io", Resource: "names", Namespace: ns}
}

// Need asks the API server (a SelfSubjectAccessReview) whether the caller has every permission,
// and names the first it lacks: RBAC's refusal of a port-forward otherwise reaches the user as a
// failed stream upgrade, which says nothing of what is missing.
func Need(ctx context.Context, c kubernetes.Interface, perms ...Permission) error {
	for _, p := range perms {
		review := &authz.SelfSubjectAccessReview{Spec: authz.SelfSubjectAccessReviewSpec{ResourceAttributes: &authz.ResourceAttributes{
			Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Namespace: p.Namespace,
		}}}
		got, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, meta.CreateOptions{})
		if err != nil {
			return fmt.Errorf("asking the API server whether you may %s: %w", p, err)
		}
		if !got.Status.Allowed {
			why := ""
			if got.Status.Reason != "" {
				why = " (" + got.Status.Reason + ")"
			}
			return fmt.Errorf("RBAC forbids it: you may not %s%s; ask for verb %q on resource %q (kubectl auth can-i %s %s)",
				p, why, p.Verb, p.resource(), p.Verb, p.resource()+namespaceFlag(p.Namespace))
		}
	}
	return nil
}

func namespaceFlag(ns string) string {
	if ns == "" {
		return ""
	}
	return " -n " + ns
}
