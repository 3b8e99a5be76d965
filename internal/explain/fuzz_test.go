package explain

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/kubetree/kubetree/internal/explainapi"

	"github.com/miekg/dns"
)

// FuzzHandlers sends /explain and /dump every query string a client could: each gets a status the
// handlers document (200, 400, 404, 503), never a panic; a 200 is well-formed JSON (one object for
// /explain, one a line for /dump, no more than limit= asks), and a page's cursor is a name.
func FuzzHandlers(f *testing.F) {
	l := &explainListener{dumps: make(chan struct{}, maxDumps), users: []*Explainer{New(servicesInstance(f, 30))}}
	for _, seed := range []string{
		"name=service-with-a-long-name-000001.prod.svc.cluster.local", "name=prod.svc.cluster.local&type=soa",
		"name=x.prod.svc.cluster.local&type=srv&client=10.0.0.1", "name=1.0.0.10.in-addr.arpa&type=PTR",
		"name=%00", "name=a..b", "type=ANY", "name=a&type=TYPE65535", "name=a&client=::ffff:1.2.3.4",
		"name=" + strings.Repeat("a.", 200), "name=example.org&server=nope",
		"limit=3", "after=&limit=0", "limit=10001", "limit=-1", "after=prod.svc.cluster.local.&limit=3",
		"after=zzz.prod.svc.cluster.local&limit=1", "after=%ff%fe", "limit=3&limit=4", "server=test://bounds",
	} {
		f.Add(false, seed)
		f.Add(true, seed)
	}
	f.Fuzz(func(t *testing.T, dump bool, rawQuery string) {
		r := httptest.NewRequest(http.MethodGet, "http://explain/", nil)
		r.URL.RawQuery = rawQuery
		r.RemoteAddr = "127.0.0.1:40000" // on loopback: served without a token
		w := httptest.NewRecorder()
		if dump {
			l.dump(w, r)
		} else {
			l.explain(w, r)
		}
		switch w.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable:
			return
		default:
			t.Fatalf("%q: status %d", rawQuery, w.Code)
		}
		if !dump {
			var x explainapi.Explanation
			if err := json.Unmarshal(w.Body.Bytes(), &x); err != nil {
				t.Fatalf("%q: %v\n%s", rawQuery, err, w.Body)
			}
			if _, ok := dns.IsDomainName(x.Name); !ok || !dns.IsFqdn(x.Name) || x.Reason == "" {
				t.Fatalf("%q: explained %q, reason %q", rawQuery, x.Name, x.Reason)
			}
			return
		}
		lines := 0
		sc := bufio.NewScanner(w.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var n explainapi.DumpedName
			if err := json.Unmarshal(sc.Bytes(), &n); err != nil || !dns.IsFqdn(n.Name) {
				t.Fatalf("%q: line %d: %v: %s", rawQuery, lines+1, err, sc.Bytes())
			}
			lines++
		}
		q := r.URL.Query()
		if limit, err := strconv.Atoi(q.Get("limit")); q.Has("limit") && (err != nil || lines > limit) {
			t.Fatalf("%q: %d names on a page of limit %q", rawQuery, lines, q.Get("limit"))
		}
		if next := w.Header().Get(explainapi.NextHeader); next != "" {
			if _, ok := dns.IsDomainName(next); !ok {
				t.Fatalf("%q: next page after %q, not a name", rawQuery, next)
			}
		}
	})
}
