package kubetree

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/kubetree/kubetree/internal/object"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// A watch can stay open and still miss a change (an API server or watch-cache bug): the informer
// then holds a stale object, and DNS serves it until the next relist, which may never come. The
// audit lists every resource from the API server now and then, takes each object through the
// informer's own transform, and compares it with what the informer holds. What differs is checked
// again after auditGrace (a change still on its way through the watch is not a fault), fetched
// fresh, and repaired through the same handlers a watch event goes through. Pages keep its memory
// small: a page of objects, and the keys seen.

const (
	defaultAuditInterval = 5 * time.Minute
	auditPage            = 500
	auditGrace           = 2 * time.Second
)

// auditLoop audits every interval, each wait drawn from ±20% of it so that replicas spread their
// lists, until the watcher stops.
func (w *watcher) auditLoop(ctx context.Context, interval time.Duration) {
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
		repairs, err := w.audit(ctx)
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

// audit compares every resource with the API server and repairs what the watches missed.
func (w *watcher) audit(ctx context.Context) (repairs int, err error) {
	for _, r := range w.resources {
		suspects, err := w.suspects(ctx, r)
		if err != nil {
			return repairs, err
		}
		if len(suspects) == 0 {
			continue
		}
		if err := sleepCtx(ctx, auditGrace); err != nil {
			return repairs, err
		}
		for _, key := range suspects {
			repaired, err := w.repair(ctx, r, key)
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

// suspects lists r page by page and returns the keys whose object differs from the informer's:
// changed, missing from the informer, or gone from the API server.
func (w *watcher) suspects(ctx context.Context, r *watched) ([]string, error) {
	store := r.informer.GetStore()
	seen := map[string]bool{}
	var suspects []string
	opts := meta.ListOptions{Limit: auditPage}
	for {
		list, err := r.list(ctx, opts)
		if err != nil {
			return nil, err
		}
		err = eachSlim(list, r.transform, func(key string, obj any) {
			seen[key] = true
			old, exists, _ := store.GetByKey(key)
			if !exists || r.changed(old, obj) {
				suspects = append(suspects, key)
			}
		})
		if err != nil {
			return nil, err
		}
		l, err := apimeta.ListAccessor(list)
		if err != nil {
			return nil, err
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			break
		}
	}
	for _, key := range store.ListKeys() {
		if !seen[key] {
			suspects = append(suspects, key)
		}
	}
	return suspects, nil
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

// repair fetches the object under key afresh and, if the informer still holds something else,
// puts the fresh one (or its absence) in the informer and hands the change to its handlers.
func (w *watcher) repair(ctx context.Context, r *watched, key string) (bool, error) {
	ns, name, cut := strings.Cut(key, "/")
	if !cut {
		ns, name = "", key
	}
	selector := "metadata.name=" + name
	if ns != "" {
		selector += ",metadata.namespace=" + ns
	}
	list, err := r.list(ctx, meta.ListOptions{FieldSelector: selector})
	if err != nil {
		return false, err
	}
	var fresh any
	err = eachSlim(list, r.transform, func(k string, obj any) {
		if k == key {
			fresh = obj
		}
	})
	if err != nil {
		return false, err
	}
	store := r.informer.GetStore()
	old, exists, _ := store.GetByKey(key)
	switch {
	case !exists && fresh == nil, exists && fresh != nil && !r.changed(old, fresh):
		return false, nil // the watch caught up meanwhile
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
	w.metrics.repaired(r.name)
	return true, nil
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
