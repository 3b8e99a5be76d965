package watcher

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/wire"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// A watch can stay open and still miss a change (an API server or watch-cache bug): the informer
// then holds a stale object, and DNS serves it until the next relist, which may never come. The
// audit asks the API server now and then for the name and resourceVersion of every object it
// watches, and compares each version with the one the informer holds. Only the keys that differ
// are looked at again: an object whose version differs, that the informer lacks, or that the API
// server no longer has. After auditGrace (a change still on its way through the watch is not a
// fault) what still differs is fetched in full, taken through the informer's own transform, and
// repaired through the same handlers a watch event goes through.
//
// The lists are metadata only (PartialObjectMetadataList, in protobuf): an EndpointSlice's
// metadata is under 1 KB where the slice of 100 endpoints is ~14 KB, and the API server encodes and
// sends only that. kubetree reads each list as it streams in and keeps the namespace, name and
// version of one object at a time (wire.ReadVersions); what grows with the list is the set of
// keys seen (to find what the API server no longer has), about 6 MB at 100,000 objects.
// The lists ask for resourceVersion "" and no limit: kube-apiserver serves that from its watch
// cache as a consistent read (it asks etcd for its current revision, and answers once its cache has
// caught up with it), the whole list from the cache. A paged list is served from the cache only in
// part: its first page is, but a page after it only from the cache's snapshot at the list's
// revision, and a resource that has not changed since etcd's last compaction (every 5 minutes) has
// none; every further page is then read from etcd and decoded in full, which costs the API server
// as much as a full list (bench/AUDIT.md). resourceVersion "0" is served from the cache without
// waiting, so it would not see a cache that has fallen behind etcd.
//
// bench/AUDIT.md measures it at 1,000,000 endpoints: 11.4 MB and about 0.2 s of the API server's
// CPU an audit, against 146 MB and 1.4 s when the audit listed everything in full every 5 minutes.
// The default interval is what issue #20 asks of a replica under 10 EndpointSlice updates a
// second at that size: at most 1.05 times an in-tree replica's cost to the API server, in bytes and
// in CPU. An in-tree replica's EndpointSlice watch costs it about 510 MB and 5 to 7 s of CPU an
// hour there (bench/WATCHCOST.md): every 60 minutes an audit adds 1.02 times the bytes and 1.03 to
// 1.06 times the CPU; every 30, 1.045 times the bytes but 1.06 to 1.12 times the CPU. The lists
// are asked for uncompressed ("identity", past gzipTransport): gzip would cut the bytes tenfold,
// but at this interval the bytes are not what binds, and compressing 11 MB is the API server's CPU
// (bench/STEADY.md).

const (
	DefaultAuditInterval = 60 * time.Minute
	auditGrace           = 2 * time.Second
)

// auditLoop audits every interval, each wait drawn from ±20% of it so that replicas spread their
// lists, until the watcher stops.
func (w *Watcher) auditLoop(ctx context.Context, interval time.Duration) {
	for {
		wait := interval*4/5 + rand.N(interval*2/5+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		start := time.Now()
		repairs, err := w.Audit(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warningf("audit: %v", err)
		case repairs == 0:
			log.Infof("audit: in step with the API server (%s)", time.Since(start).Round(time.Millisecond))
		default:
			log.Warningf("audit: %d objects repaired (%s)", repairs, time.Since(start).Round(time.Millisecond))
		}
	}
}

// Audit compares every resource with the API server now and repairs what the watches missed;
// auditLoop calls it every audit_interval.
func (w *Watcher) Audit(ctx context.Context) (repairs int, err error) {
	for _, r := range w.resources {
		differ, err := w.differing(ctx, r)
		if err != nil {
			return repairs, err
		}
		if len(differ) == 0 {
			continue
		}
		if err := sleepCtx(ctx, auditGrace); err != nil {
			return repairs, err
		}
		store := r.informer.GetStore()
		for _, d := range differ {
			if heldVersion(store, d.key) == d.version {
				continue // the watch has caught up
			}
			repaired, err := w.repair(ctx, r, d.key)
			if err != nil {
				return repairs, err
			}
			if repaired {
				repairs++
			}
		}
	}
	return repairs, nil
}

// listedVersion is the version of the object under key in the API server's list; "" if the list
// does not have it.
type listedVersion struct{ key, version string }

// differing lists the names and versions of r, and returns the keys whose version in the informer
// differs from the API server's: changed, missing from the informer, or gone from the API server.
func (w *Watcher) differing(ctx context.Context, r *watched) ([]listedVersion, error) {
	store := r.informer.GetStore()
	seen := map[string]struct{}{}
	var differ []listedVersion
	err := w.listVersions(ctx, r, func(namespace, name, version string) {
		key := cache.ObjectName{Namespace: namespace, Name: name}.String()
		seen[key] = struct{}{}
		if heldVersion(store, key) != version {
			differ = append(differ, listedVersion{key, version})
		}
	})
	if err != nil {
		return nil, err
	}
	for _, key := range store.ListKeys() {
		if _, ok := seen[key]; !ok {
			differ = append(differ, listedVersion{key: key})
		}
	}
	return differ, nil
}

// listVersions lists every object of r that its label selector selects, metadata only, as a
// consistent read served from the API server's watch cache, and hands f the namespace, name and
// resourceVersion of each as the list streams in.
func (w *Watcher) listVersions(ctx context.Context, r *watched, f func(namespace, name, version string)) error {
	path := []string{"/apis", r.resource.Group, r.resource.Version, r.resource.Resource}
	if r.resource.Group == "" {
		path = []string{"/api", r.resource.Version, r.resource.Resource}
	}
	req := w.versions.Get().AbsPath(path...).SetHeader("Accept", partialListAccept).SetHeader("Accept-Encoding", "identity")
	if r.labels != "" {
		req = req.Param("labelSelector", r.labels)
	}
	body, err := req.Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := wire.ReadVersions(body, f); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	return nil
}

// heldVersion is the version of what the informer's store holds under key; "" for nothing.
func heldVersion(store cache.Store, key string) string {
	obj, exists, _ := store.GetByKey(key)
	if !exists {
		return ""
	}
	return object.VersionOf(obj)
}

// repair fetches the object under key in full and, if the informer holds another version of it,
// puts the fresh one (or its absence) in the informer and hands the change to its handlers. A
// version that differs only where DNS does not look is stored too (the handlers pass it over, as
// they would the watch event), so that the next audit does not fetch it again; it is not a repair.
func (w *Watcher) repair(ctx context.Context, r *watched, key string) (bool, error) {
	fresh, err := fetch(ctx, r, key)
	if err != nil {
		return false, err
	}
	store := r.informer.GetStore()
	old, exists, _ := store.GetByKey(key)
	switch {
	case !exists && fresh == nil, exists && fresh != nil && object.VersionOf(old) == object.VersionOf(fresh):
		return false, nil // the watch caught up meanwhile
	case exists && fresh != nil && !r.changed(old, fresh):
		_ = store.Update(fresh)
		r.handlers.OnUpdate(old, fresh)
		w.applyQueued()
		log.Infof("audit: %s %s was behind the API server where DNS does not look (version %s, not %s); updated",
			r.name, key, object.VersionOf(old), object.VersionOf(fresh))
		return false, nil
	case fresh == nil:
		_ = store.Delete(old)
		r.handlers.OnDelete(old)
		log.Warningf("audit: %s %s is gone from the API server but was still served; removed", r.name, key)
	case !exists:
		_ = store.Add(fresh)
		r.handlers.OnAdd(fresh, false)
		log.Warningf("audit: %s %s exists in the API server but was not served; added", r.name, key)
	default:
		_ = store.Update(fresh)
		r.handlers.OnUpdate(old, fresh)
		log.Warningf("audit: %s %s differed from the API server; updated", r.name, key)
	}
	w.metrics.Repairs(r.name).Inc()
	w.applyQueued()
	return true, nil
}

// fetch reads the object under key in full, taken through the informer's transform; nil if the
// API server does not have it or it does not match r's selector. It lists the object's namespace
// with a field selector on its name, which the API server serves as a read of that one key (a GET
// would not apply the label selector).
func fetch(ctx context.Context, r *watched, key string) (any, error) {
	ns, name, cut := strings.Cut(key, "/")
	if !cut {
		ns, name = "", key
	}
	list, err := r.list(ctx, ns, meta.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return nil, err
	}
	var fresh any
	err = eachSlim(list, r.transform, func(k string, obj any) {
		if k == key {
			fresh = obj
		}
	})
	return fresh, err
}

// eachSlim calls f with every item of list, slimmed by transform, and its key.
func eachSlim(list runtime.Object, transform cache.TransformFunc, f func(key string, obj any)) error {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		obj, err := transform(item)
		if err != nil {
			return err
		}
		if key := object.KeyOf(obj); key != "" {
			f(key, obj)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
