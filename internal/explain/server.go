package explain

import (
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// The explain option's HTTP listener. Like CoreDNS's prometheus and health listeners, one address
// may be named by several server blocks, and by the old and the new instance of a Corefile
// reload: caddy starts the new instance (its OnStartup) before it shuts the old one down (its
// OnShutdown). So the listeners are kept by address, for the whole process: the first instance to
// start on an address opens it, later ones join it, and the last one to shut down closes it. A
// reload hands the listener over without closing it, and leaks nothing.

var log = clog.NewWithPlugin("kubetree")

// explainListeners are the open explain listeners by address.
var explainListeners = struct {
	sync.Mutex
	byAddr map[string]*explainListener
}{byAddr: map[string]*explainListener{}}

// What one client may cost the listener. A request is read within readTimeout; every write of a
// reply (a page of a dump, at most explainapi.MaxDumpLimit names) must be taken within
// writeTimeout, so that a client that stops reading frees its connection and its page; an idle
// keep-alive connection is closed after idleTimeout; at most maxConnections are open (more wait to
// be accepted), at most maxPerSource of one address off loopback (more are closed at once: one
// flooding source leaves the others room), and at most maxDumps dumps are written at once (more are refused, 503, to come back
// after Retry-After).
// (Variables, not constants, so that the package's tests can make them short.)
var (
	// trustLoopback serves callers on loopback without a token (the package's flood test turns it
	// off, to be a caller off loopback from loopback).
	trustLoopback  = true
	readTimeout    = 5 * time.Second
	writeTimeout   = 10 * time.Second
	idleTimeout    = 30 * time.Second
	maxHeaderBytes = 8 << 10
	maxConnections = 64
	maxPerSource   = 8
	maxDumps       = 4
)

// explainListener serves /explain and /dump on one address, for the instances that named it.
type explainListener struct {
	addr   net.Addr // as bound: the port, when ADDRESS asked for any
	srv    *http.Server
	served sync.WaitGroup
	dumps  chan struct{} // a place per dump being written

	mu    sync.Mutex
	users []*Explainer // in the order they started: the newest answers unless asked for another
}

// Start serves in's explanations on addr: it opens the address, or joins the listener already
// there. It returns the address listened on (the port, when addr asked for any).
func Start(addr string, in *Instance) (net.Addr, error) {
	e := New(in)
	explainListeners.Lock()
	defer explainListeners.Unlock()
	l := explainListeners.byAddr[addr]
	if l == nil {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		l = &explainListener{addr: ln.Addr(), dumps: make(chan struct{}, maxDumps)}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /explain", l.explain)
		mux.HandleFunc("GET /dump", l.dump)
		l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: readTimeout, ReadTimeout: readTimeout, IdleTimeout: idleTimeout,
			MaxHeaderBytes: maxHeaderBytes}
		l.served.Go(func() { l.srv.Serve(limitConnections(ln, maxConnections, maxPerSource)) })
		explainListeners.byAddr[addr] = l
		log.Infof("explain: serving /explain and /dump on %s", ln.Addr())
	}
	l.mu.Lock()
	l.users = append(l.users, e)
	l.mu.Unlock()
	return l.addr, nil
}

// Stop takes in off the listener on addr, and closes the listener when in was the last to use it.
func Stop(addr string, in *Instance) {
	explainListeners.Lock()
	defer explainListeners.Unlock()
	l := explainListeners.byAddr[addr]
	if l == nil {
		return
	}
	l.mu.Lock()
	l.users = slices.DeleteFunc(l.users, func(u *Explainer) bool { return u.Instance == in })
	last := len(l.users) == 0
	l.mu.Unlock()
	if !last {
		return
	}
	delete(explainListeners.byAddr, addr)
	l.srv.Close()
	l.served.Wait()
}

// user picks the instance that answers: the newest of server (the server block's address, as
// in the metrics' server label) when given, else the newest that serves name ("": any).
func (l *explainListener) user(server, name string) *Explainer {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range slices.Backward(l.users) {
		if server != "" && u.Server != server {
			continue
		}
		if name == "" || server != "" || tree.MatchZone(u.zones, name) >= 0 {
			return u
		}
	}
	if server == "" && len(l.users) > 0 {
		return l.users[len(l.users)-1] // outside every zone: the newest says so
	}
	return nil
}

var errNoServer = errors.New("no kubetree server block of that name uses this listener")

// caller is who asks r, and what it may read (access.go); it answers r and returns nil when the
// caller may read nothing. A caller on loopback may read everything: the node itself, or kubectl
// port-forward, which the API server has authorized already. Any other must bring a bearer token
// that the API server authenticates (401 otherwise, as kube-rbac-proxy answers); what it may read
// is then decided namespace by namespace.
func (l *explainListener) caller(w http.ResponseWriter, r *http.Request, verb string) *access {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err == nil && peer.Addr().Unmap().IsLoopback() && trustLoopback {
		return &access{}
	}
	e := l.user("", "")
	if e == nil || e.Authorize == nil {
		http.Error(w, "this endpoint serves loopback only", http.StatusForbidden)
		return nil
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kubetree"`)
		http.Error(w, "a bearer token is needed (Authorization: Bearer TOKEN), or a connection from loopback (kubectl port-forward)", http.StatusUnauthorized)
		return nil
	}
	source := peer.Addr().Unmap()
	if status, why := e.Authorize.Authenticate(r.Context(), source, token); status != 0 {
		refuse(w, status, why)
		return nil
	}
	return &access{auth: e.Authorize, ctx: r.Context(), source: source, token: token, verb: verb, seen: map[string]decided{}}
}

// refuse answers a caller that may not read what it asked for.
func refuse(w http.ResponseWriter, status int, why string) {
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="kubetree"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, why, status)
}

// explain serves GET /explain?name=NAME[&type=TYPE][&client=ADDRESS][&server=SERVER].
func (l *explainListener) explain(w http.ResponseWriter, r *http.Request) {
	a := l.caller(w, r, "get")
	if a == nil {
		return
	}
	q := r.URL.Query()
	name := q.Get("name")
	// UTF-8 too: the reply is JSON, which cannot carry other bytes as they are.
	if _, ok := dns.IsDomainName(name); !ok || name == "" || !utf8.ValidString(name) {
		http.Error(w, "name= must be a domain name", http.StatusBadRequest)
		return
	}
	name = dns.Fqdn(name)
	qtype := dns.TypeA
	if t := q.Get("type"); t != "" {
		var ok bool
		if qtype, ok = dns.StringToType[strings.ToUpper(t)]; !ok {
			http.Error(w, "type= must be a DNS type such as A, AAAA, SRV, PTR", http.StatusBadRequest)
			return
		}
	}
	client := explainapi.DefaultClient
	if c := q.Get("client"); c != "" {
		a, err := netip.ParseAddr(c)
		if err != nil {
			http.Error(w, "client= must be an IP address", http.StatusBadRequest)
			return
		}
		client = a.Unmap()
	}
	e := l.user(q.Get("server"), name)
	if e == nil {
		http.Error(w, errNoServer.Error(), http.StatusNotFound)
		return
	}
	// The client's namespace is asked for first: a caller who may not read it costs no explanation.
	if ns := e.clientNamespace(client); ns != "" {
		if status, why := a.may(ns); status != 0 {
			refuse(w, status, why)
			return
		}
	}
	x := e.Explain(r.Context(), name, qtype, client)
	if status, why := a.mayAll(e.told(x)); status != 0 {
		refuse(w, status, why)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(x)
}

// dump serves GET /dump[?after=NAME][&limit=N][&server=SERVER]: JSON lines, one a name. With
// limit, one page of at most limit names, and the next page's after= in the Kubetree-Next-After
// header; without, every name, a page at a time.
func (l *explainListener) dump(w http.ResponseWriter, r *http.Request) {
	a := l.caller(w, r, "list")
	if a == nil {
		return
	}
	q := r.URL.Query()
	after := q.Get("after")
	if _, ok := dns.IsDomainName(after); after != "" && (!ok || !utf8.ValidString(after)) {
		http.Error(w, "after= must be a domain name", http.StatusBadRequest)
		return
	}
	limit, paged := explainapi.DefaultDumpLimit, q.Has("limit")
	if paged {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > explainapi.MaxDumpLimit {
			http.Error(w, "limit= must be a whole number in [1, "+strconv.Itoa(explainapi.MaxDumpLimit)+"]", http.StatusBadRequest)
			return
		}
		limit = n
	}
	e := l.user(q.Get("server"), "")
	if e == nil {
		http.Error(w, errNoServer.Error(), http.StatusNotFound)
		return
	}
	select {
	case l.dumps <- struct{}{}:
		defer func() { <-l.dumps }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many dumps at once: try again", http.StatusServiceUnavailable)
		return
	}
	// A caller who may list every namespace's names gets them all; any other, those of the
	// namespaces it may (the others' are left out, and still count toward a page: a page costs
	// what its names do, whatever the caller may read).
	var keep func(string) bool
	if status, why := a.may(""); status == http.StatusServiceUnavailable || status == http.StatusUnauthorized {
		refuse(w, status, why)
		return
	} else if status != 0 {
		keep = func(name string) bool {
			ns := namespaceOf(e.zones, name)
			status, _ := a.may(ns)
			return ns != "" && status == 0
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/jsonl")
	if paged {
		// The header goes before the body: the page is made first, then written.
		var page []explainapi.DumpedName
		next, _ := e.DumpPage(after, limit, keep, func(n explainapi.DumpedName) error { page = append(page, n); return nil })
		if next != "" {
			w.Header().Set(explainapi.NextHeader, next)
		}
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		writeLines(w, page)
		return
	}
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	for {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // for this page: a reader that stops ends the dump
		next, err := e.DumpPage(after, limit, keep, func(n explainapi.DumpedName) error { return enc.Encode(n) })
		if err == nil {
			err = out.Flush()
		}
		if err != nil || next == "" || r.Context().Err() != nil {
			return
		}
		after = next
	}
}

// limitConnections accepts at most max connections of ln at once, and at most perSource of one
// source address (of a source on loopback when trustLoopback is off: kubectl port-forward's
// connections all come from loopback): the next from a source that has its share is closed at
// once, and the next past max waits until one closes.
func limitConnections(ln net.Listener, max, perSource int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, max), perSource: perSource, open: map[netip.Addr]int{}}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	perSource int
	mu        sync.Mutex
	open      map[netip.Addr]int // connections open by source, off loopback
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		l.slots <- struct{}{}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		source, ok := l.take(c.RemoteAddr())
		if !ok {
			c.Close()
			<-l.slots
			continue
		}
		return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.give(source); <-l.slots })}, nil
	}
}

// take counts a connection of addr's source, and reports false when the source has its share.
func (l *limitedListener) take(addr net.Addr) (netip.Addr, bool) {
	peer, err := netip.ParseAddrPort(addr.String())
	if err != nil || trustLoopback && peer.Addr().Unmap().IsLoopback() {
		return netip.Addr{}, true
	}
	source := peer.Addr().Unmap()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[source] >= l.perSource {
		return source, false
	}
	l.open[source]++
	return source, true
}

func (l *limitedListener) give(source netip.Addr) {
	if !source.IsValid() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[source]--; l.open[source] <= 0 {
		delete(l.open, source)
	}
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

func writeLines(w http.ResponseWriter, names []explainapi.DumpedName) {
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	for _, n := range names {
		if enc.Encode(n) != nil {
			break
		}
	}
	out.Flush()
}
