package query

import (
	"reflect"
	"sync"

	"github.com/coredns/coredns/plugin/cache"

	"github.com/miekg/dns"
)

// A reply made for one client must not reach a cache that hands it to others. The cache plugin of
// kubetree's own server block bypasses kubetree's zones (Kubetree.CacheBypassZones), but a query
// can reach kubetree for a name of another zone too: another plugin (file, auto, etcd, template,
// k8s_external…) chases its CNAME into kubetree's zones through CoreDNS itself (plugin/pkg/upstream),
// and the reply it builds from kubetree's answer is cached under its own name, which nothing
// bypasses. Stock CoreDNS's cache offers no way to keep one reply out of it; what it does offer is
// its writer, which wraps the writer the chain below it gets, so that the writer kubetree answers
// through says whether a cache will keep the reply. When one will, kubetree answers as it answers
// every client alike: the names of the open namespaces only, every endpoint.

// maxWrappers bounds how many writers wrapping each other feedsCache looks through.
const maxWrappers = 16

var (
	cacheWriterType = reflect.TypeFor[*cache.ResponseWriter]()
	writerType      = reflect.TypeFor[dns.ResponseWriter]()
	// wrapped are the writer types seen, each with the index of its field that holds the writer it
	// wraps (-1: it wraps none). The types are the chain's plugins' writers: a few.
	wrapped sync.Map // reflect.Type -> int
)

// feedsCache reports whether the reply written to w goes into a cache plugin's store, under
// whatever question that cache was asked: whether w, or a writer w wraps, is the cache's.
func feedsCache(w dns.ResponseWriter) bool {
	v := reflect.ValueOf(w)
	for range maxWrappers {
		if !v.IsValid() {
			return false
		}
		if v.Type() == cacheWriterType {
			return true
		}
		if v.Kind() == reflect.Interface {
			v = v.Elem()
			continue
		}
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return false
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return false
		}
		i := innerField(v.Type())
		if i < 0 {
			return false
		}
		v = v.Field(i)
	}
	return false
}

// innerField is the index of the first field of struct type t that is a writer (the writer it
// wraps: plugins embed the one they are given), or -1.
func innerField(t reflect.Type) int {
	if i, ok := wrapped.Load(t); ok {
		return i.(int)
	}
	i := -1
	for f := range t.NumField() {
		if ft := t.Field(f).Type; ft == writerType || ft.Kind() == reflect.Pointer && ft.Implements(writerType) {
			i = f
			break
		}
	}
	wrapped.Store(t, i)
	return i
}
