package informer

import (
	"slices"
	"testing"

	"github.com/kubetree/kubetree/internal/object"

	api "k8s.io/api/core/v1"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestObjectStore keeps slim objects, API objects and cluster-scoped ones as client-go's indexer
// does: by the keys its key function gives, with the namespace index.
func TestObjectStore(t *testing.T) {
	s := newObjectStore()
	web := &object.StoredService{Meta: object.Meta{Namespace: "prod", Name: "web", ResourceVersion: "1"}}
	db := &api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "db"}}
	other := &object.StoredService{Meta: object.Meta{Namespace: "dev", Name: "web"}}
	ns := &object.StoredNamespace{Meta: object.Meta{Name: "prod"}}
	for _, obj := range []any{web, db, other, ns} {
		if err := s.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(k []string, _ ...any) []string { slices.Sort(k); return k }
	if got := keys(s.ListKeys()); !slices.Equal(got, []string{"dev/web", "prod", "prod/db", "prod/web"}) || len(s.List()) != 4 {
		t.Errorf("keys %q, %d objects", got, len(s.List()))
	}
	if got := keys(s.IndexKeys(cache.NamespaceIndex, "prod")); !slices.Equal(got, []string{"prod/db", "prod/web"}) {
		t.Errorf("prod holds %q", got)
	}
	if objs, _ := s.ByIndex(cache.NamespaceIndex, "dev"); len(objs) != 1 || objs[0] != other {
		t.Errorf("dev holds %v", objs)
	}
	if _, err := s.IndexKeys("nodes", "x"); err == nil {
		t.Errorf("an index that does not exist")
	}
	newer := &object.StoredService{Meta: object.Meta{Namespace: "prod", Name: "web", ResourceVersion: "2"}}
	_ = s.Update(newer)
	if got, ok, _ := s.GetByKey("prod/web"); !ok || got != newer {
		t.Errorf("prod/web after an update: %v", got)
	}
	if got, ok, _ := s.Get(&api.Service{ObjectMeta: meta.ObjectMeta{Namespace: "prod", Name: "db"}}); !ok || got != db {
		t.Errorf("prod/db by object: %v", got)
	}
	if got, ok, _ := s.GetByKey("prod"); !ok || got != ns {
		t.Errorf("the namespace: %v", got)
	}
	_ = s.Delete(other)
	_ = s.Delete(other)
	if _, ok, _ := s.GetByKey("dev/web"); ok || len(s.ListKeys()) != 3 || len(s.ListIndexFuncValues(cache.NamespaceIndex)) != 2 {
		t.Errorf("after a delete: %q, namespaces %q", s.ListKeys(), s.ListIndexFuncValues(cache.NamespaceIndex))
	}
	if err := s.Replace([]any{other, web}, "7"); err != nil {
		t.Fatal(err)
	}
	if got := keys(s.ListKeys()); !slices.Equal(got, []string{"dev/web", "prod/web"}) || s.LastStoreSyncResourceVersion() != "7" {
		t.Errorf("after a replace: %q at %q", got, s.LastStoreSyncResourceVersion())
	}
	if got, _, _ := s.GetByKey("prod/web"); got != web {
		t.Errorf("a replace keeps the listed version: %v", got)
	}
}
