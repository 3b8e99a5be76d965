package watcher

import (
	"slices"
	"testing"

	"github.com/kubetree/kubetree/internal/object"
)

// TestSliceIndex: a service's slices come and go, move to another service, and a namespace
// without any is forgotten.
func TestSliceIndex(t *testing.T) {
	x := NewSliceIndex()
	slice := func(svc, name, version string) *object.StoredSlice {
		return &object.StoredSlice{Meta: object.Meta{Namespace: "prod", Name: name, ResourceVersion: version}, Service: svc}
	}
	a1, a2, b1 := slice("a", "a-1", "1"), slice("a", "a-2", "1"), slice("b", "b-1", "1")
	x.Replace(nil, a1)
	x.Replace(nil, a2)
	x.Replace(nil, b1)
	x.Replace(slice("c", "c-1", "1"), nil) // a slice the index never had: nothing else goes
	if got := x.Of("prod/a"); !slices.Equal(got, []*object.StoredSlice{a1, a2}) || len(x.Of("prod/b")) != 1 {
		t.Fatalf("prod/a %v, prod/b %v", got, x.Of("prod/b"))
	}
	moved := slice("b", "a-2", "2")
	x.Replace(a2, moved)
	if got := x.Of("prod/b"); !slices.Equal(x.Of("prod/a"), []*object.StoredSlice{a1}) || !slices.Equal(got, []*object.StoredSlice{b1, moved}) {
		t.Fatalf("after a move: prod/a %v, prod/b %v", x.Of("prod/a"), got)
	}
	for _, s := range []*object.StoredSlice{a1, b1, moved} {
		x.Replace(s, nil)
	}
	if len(x.bySvc) != 0 || x.Of("prod/b") != nil {
		t.Errorf("left behind: %v", x.bySvc)
	}
}
