package k8stest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	api "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	mcs "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
)

// PartialListAccept asks for a list of the objects' metadata only, in protobuf: the audit's lists.
const PartialListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// FakeAPI is client-go's fake clientset, made to behave like an API server where the watcher
// depends on it: every write gets a new resourceVersion; a watch with a label selector reports an
// object that stops matching as deleted and one that starts matching as added (as the API server's
// watch cache does); and delete events can be lost and watches expired, so that an informer relists
// and delivers tombstones. versions serves the metadata-only lists of the same objects.
type FakeAPI struct {
	Client     *fake.Clientset
	Versions   *FakeVersions
	rv         atomic.Int64
	LoseDelete atomic.Bool  // drop delete events
	LoseAll    atomic.Bool  // drop every event
	Lost       atomic.Int64 // events dropped by LoseAll

	mu      sync.Mutex
	watches map[string][]*filterWatch // open watches by resource
	opens   map[string]int            // watches ever opened, by resource
}

func NewFakeAPI(objs ...runtime.Object) *FakeAPI {
	a := &FakeAPI{watches: map[string][]*filterWatch{}, opens: map[string]int{}}
	a.rv.Store(100)
	for _, o := range objs {
		if m, err := apimeta.Accessor(o); err == nil && m.GetResourceVersion() == "" {
			m.SetResourceVersion(strconv.FormatInt(a.rv.Add(1), 10))
		}
	}
	a.Client = fake.NewClientset(objs...)
	a.Versions = TrackerVersions(a.Client.Tracker())
	stamp := func(act k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := act.(interface{ GetObject() runtime.Object }); ok {
			if m, err := apimeta.Accessor(o.GetObject()); err == nil {
				m.SetResourceVersion(strconv.FormatInt(a.rv.Add(1), 10))
			}
		}
		return false, nil, nil
	}
	a.Client.PrependReactor("create", "*", stamp)
	a.Client.PrependReactor("update", "*", stamp)
	a.Client.PrependWatchReactor("*", func(act k8stesting.Action) (bool, watch.Interface, error) {
		wa, ok := act.(k8stesting.WatchActionImpl)
		if !ok {
			return false, nil, nil
		}
		sel, err := labels.Parse(wa.ListOptions.LabelSelector)
		if err != nil {
			return true, nil, err
		}
		inner, err := a.Client.Tracker().Watch(act.GetResource(), act.GetNamespace(), wa.ListOptions)
		if err != nil {
			return true, nil, err
		}
		fw := &filterWatch{api: a, resource: act.GetResource(), inner: inner, sel: sel, state: map[string]bool{},
			out: make(chan watch.Event), inject: make(chan watch.Event, 1), done: make(chan struct{})}
		// What matched when the watch opened, so that a later change can be told apart: the API
		// server compares with the object's previous version.
		list, err := a.Client.Tracker().List(act.GetResource(), kinds[act.GetResource().Resource], act.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		items, _ := apimeta.ExtractList(list)
		for _, o := range items {
			if m, err := apimeta.Accessor(o); err == nil {
				fw.state[m.GetNamespace()+"/"+m.GetName()] = sel.Matches(labels.Set(m.GetLabels()))
			}
		}
		a.mu.Lock()
		a.watches[fw.resource.Resource] = append(a.watches[fw.resource.Resource], fw)
		a.opens[fw.resource.Resource]++
		a.mu.Unlock()
		go fw.run()
		return true, fw, nil
	})
	return a
}

// Create, Update and Delete change objects through the fake clientset, with the actions its typed
// clients send (so that its reactors see them); they do not wait for the watches.
func (a *FakeAPI) Create(t testing.TB, objs ...runtime.Object) { a.change(t, "create", objs) }
func (a *FakeAPI) Update(t testing.TB, objs ...runtime.Object) { a.change(t, "update", objs) }
func (a *FakeAPI) Delete(t testing.TB, objs ...runtime.Object) { a.change(t, "delete", objs) }

func (a *FakeAPI) change(t testing.TB, verb string, objs []runtime.Object) {
	t.Helper()
	for _, o := range objs {
		m, err := apimeta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		gvr, ok := resourceOf[reflect.TypeOf(o)]
		if !ok {
			t.Fatalf("cannot %s %T", verb, o)
		}
		var action k8stesting.Action
		switch verb {
		case "create":
			action = k8stesting.NewCreateAction(gvr, m.GetNamespace(), o)
		case "update":
			action = k8stesting.NewUpdateAction(gvr, m.GetNamespace(), o)
		default:
			action = k8stesting.NewDeleteAction(gvr, m.GetNamespace(), m.GetName())
		}
		if _, err := a.Client.Invokes(action, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// resourceOf is the API resource of each kind of object the tests change.
var resourceOf = map[reflect.Type]schema.GroupVersionResource{
	reflect.TypeFor[*api.Service]():             api.SchemeGroupVersion.WithResource("services"),
	reflect.TypeFor[*api.Namespace]():           api.SchemeGroupVersion.WithResource("namespaces"),
	reflect.TypeFor[*api.Pod]():                 api.SchemeGroupVersion.WithResource("pods"),
	reflect.TypeFor[*api.Node]():                api.SchemeGroupVersion.WithResource("nodes"),
	reflect.TypeFor[*discovery.EndpointSlice](): discovery.SchemeGroupVersion.WithResource("endpointslices"),
}

// Opened returns the resources watched so far, sorted.
func (a *FakeAPI) Opened() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for r := range a.opens {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// Expire ends the open watches of the resources with 410 Gone, and waits until their informers
// have relisted and watch again: everything written before is then on its way to the handlers,
// ahead of anything written after.
func (a *FakeAPI) Expire(t testing.TB, resources ...string) {
	t.Helper()
	a.mu.Lock()
	var ws []*filterWatch
	before := map[string]int{}
	for _, r := range resources {
		ws = append(ws, a.watches[r]...)
		a.watches[r] = nil
		before[r] = a.opens[r]
	}
	a.mu.Unlock()
	if len(ws) == 0 {
		t.Fatalf("no open watch on %v", resources)
	}
	gone := &meta.Status{Status: meta.StatusFailure, Code: 410, Reason: meta.StatusReasonExpired, Message: "too old resource version"}
	for _, w := range ws {
		w.inject <- watch.Event{Type: watch.Error, Object: gone}
	}
	WaitFor(t, fmt.Sprintf("relist of %v", resources), func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, r := range resources {
			if a.opens[r] == before[r] {
				return false
			}
		}
		return true
	})
}

// kinds are the kinds of the resources the fake API lists.
var kinds = map[string]schema.GroupVersionKind{
	"services":       api.SchemeGroupVersion.WithKind("Service"),
	"namespaces":     api.SchemeGroupVersion.WithKind("Namespace"),
	"endpointslices": discovery.SchemeGroupVersion.WithKind("EndpointSlice"),
	"pods":           api.SchemeGroupVersion.WithKind("Pod"),
	"serviceimports": mcs.SchemeGroupVersion.WithKind("ServiceImport"),
	"nodes":          api.SchemeGroupVersion.WithKind("Node"),
}

// ByNameSince returns the lists by name (a field selector on metadata.name: the audit's fetches)
// sent through the clientset since action mark, as "resource ns/name", sorted; and how many lists
// without one (in full) there were.
func (a *FakeAPI) ByNameSince(mark int) (byName []string, full int) {
	for _, act := range a.Client.Actions()[mark:] {
		l, ok := act.(k8stesting.ListAction)
		if !ok {
			continue
		}
		name, ok := l.GetListRestrictions().Fields.RequiresExactMatch("metadata.name")
		if !ok {
			full++
			continue
		}
		key := name
		if act.GetNamespace() != "" {
			key = act.GetNamespace() + "/" + name
		}
		byName = append(byName, act.GetResource().Resource+" "+key)
	}
	slices.Sort(byName)
	return byName, full
}

// Actions is a mark for ByNameSince: the number of actions the clientset has seen.
func (a *FakeAPI) Actions() int { return len(a.Client.Actions()) }

// FakeVersions is the API server's side of the audit's metadata-only lists: an http.RoundTripper
// under kubetree's own client for them (versionsREST) that answers GET /api/<version>/<resource>
// and /apis/<group>/<version>/<resource> as kube-apiserver answers the Accept header
// as=PartialObjectMetadataList: the metadata of the objects source lists, the label selector
// applied, in key order, in protobuf (MetadataList). It records every request.
type FakeVersions struct {
	Source   func(resource schema.GroupVersionResource) (runtime.Object, error)
	Static   bool // source always lists the same: each list is encoded once
	Truncate bool // cut every list short, as a connection that breaks does

	mu       sync.Mutex
	requests []VersionsRequest
	encoded  map[string][]byte // with static
}

// VersionsRequest is one list asked of FakeVersions.
type VersionsRequest struct {
	Resource         string
	Query            url.Values
	Accept, Encoding string // Accept, Accept-Encoding
}

// TrackerVersions serves the metadata of the objects the trackers hold (each resource from the
// first tracker whose scheme knows it).
func TrackerVersions(trackers ...k8stesting.ObjectTracker) *FakeVersions {
	return &FakeVersions{Source: func(r schema.GroupVersionResource) (runtime.Object, error) {
		var err error
		for _, t := range trackers {
			var list runtime.Object
			if list, err = t.List(r, kinds[r.Resource], ""); err == nil {
				return list, nil
			}
		}
		return nil, err
	}}
}

// Client is a client for the lists over v, as the audit's (the watcher's versionsREST).
func (v *FakeVersions) Client() rest.Interface {
	c, err := rest.UnversionedRESTClientFor(&rest.Config{Host: "http://kube-apiserver.test", Transport: v, QPS: -1,
		ContentConfig: rest.ContentConfig{NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		panic(err)
	}
	return c
}

// RequestsOf returns the requests for resource, in order.
func (v *FakeVersions) RequestsOf(resource string) []VersionsRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []VersionsRequest
	for _, r := range v.requests {
		if r.Resource == resource {
			out = append(out, r)
		}
	}
	return out
}

// RoundTrip implements http.RoundTripper.
func (v *FakeVersions) RoundTrip(req *http.Request) (*http.Response, error) {
	var r schema.GroupVersionResource
	switch p := strings.Split(strings.Trim(req.URL.Path, "/"), "/"); {
	case len(p) == 3 && p[0] == "api":
		r = schema.GroupVersionResource{Version: p[1], Resource: p[2]}
	case len(p) == 4 && p[0] == "apis":
		r = schema.GroupVersionResource{Group: p[1], Version: p[2], Resource: p[3]}
	default:
		return nil, fmt.Errorf("fake API server: no %s", req.URL.Path)
	}
	q := req.URL.Query()
	v.mu.Lock()
	v.requests = append(v.requests, VersionsRequest{Resource: r.Resource, Query: q, Accept: req.Header.Get("Accept"),
		Encoding: req.Header.Get("Accept-Encoding")})
	v.mu.Unlock()
	body, err := v.list(r, q.Get("labelSelector"))
	if err != nil {
		return nil, err
	}
	if v.Truncate {
		body = body[:len(body)/2]
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {PartialListAccept}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// list is the metadata-only list of resource's objects that match selector, as the API server
// encodes it.
func (v *FakeVersions) list(resource schema.GroupVersionResource, selector string) ([]byte, error) {
	key := resource.String() + "?" + selector
	if v.Static {
		v.mu.Lock()
		b, ok := v.encoded[key]
		v.mu.Unlock()
		if ok {
			return b, nil
		}
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	full, err := v.Source(resource)
	if err != nil {
		return nil, err
	}
	items, err := apimeta.ExtractList(full)
	if err != nil {
		return nil, err
	}
	var selected []runtime.Object
	for _, item := range items {
		m, err := apimeta.Accessor(item)
		if err != nil {
			return nil, err
		}
		if sel.Matches(labels.Set(m.GetLabels())) {
			selected = append(selected, item)
		}
	}
	rv := ""
	if l, err := apimeta.ListAccessor(full); err == nil {
		rv = l.GetResourceVersion()
	}
	b, err := MetadataList(rv, selected...)
	if err == nil && v.Static {
		v.mu.Lock()
		if v.encoded == nil {
			v.encoded = map[string][]byte{}
		}
		v.encoded[key] = b
		v.mu.Unlock()
	}
	return b, err
}

type filterWatch struct {
	api      *FakeAPI
	resource schema.GroupVersionResource
	inner    watch.Interface
	sel      labels.Selector
	state    map[string]bool // object key -> whether its last version matched; only run uses it
	out      chan watch.Event
	inject   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

func (w *filterWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *filterWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		w.inner.Stop()
	})
}

func (w *filterWatch) run() {
	defer close(w.out)
	send := func(ev watch.Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-w.done:
			return false
		}
	}
	for {
		select {
		case <-w.done:
			return
		case ev := <-w.inject:
			send(ev)
			return
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			m, err := apimeta.Accessor(ev.Object)
			if err != nil {
				continue
			}
			key := m.GetNamespace() + "/" + m.GetName()
			was, is := w.state[key], w.sel.Matches(labels.Set(m.GetLabels()))
			w.state[key] = is
			if w.api.LoseAll.Load() {
				w.api.Lost.Add(1)
				continue
			}
			switch ev.Type {
			case watch.Added:
				if !is {
					continue
				}
			case watch.Modified:
				switch {
				case is && !was:
					ev.Type = watch.Added
				case !is && was:
					ev.Type = watch.Deleted
				case !is:
					continue
				}
			case watch.Deleted:
				delete(w.state, key)
				if !was || w.api.LoseDelete.Load() {
					continue
				}
			}
			if !send(ev) {
				return
			}
		}
	}
}
