package ask

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubetree/kubetree/internal/explainapi"
)

// endpoint stands for a replica's explain endpoint: /explain answers with x, /dump pages through
// names with the endpoint's cursor header, as internal/explain's server does.
func endpoint(t *testing.T, x explainapi.Explanation, names []string) (*httptest.Server, *[]string) {
	t.Helper()
	var asked []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /explain", func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RawQuery)
		if r.URL.Query().Get("type") == "BOGUS" {
			http.Error(w, "type= must be a DNS type such as A, AAAA, SRV, PTR", http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(x)
	})
	mux.HandleFunc("GET /dump", func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.RawQuery)
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		start := 0
		if after := r.URL.Query().Get("after"); after != "" {
			start = slices.Index(names, after) + 1
		}
		end := min(start+limit, len(names))
		if end < len(names) {
			w.Header().Set(explainapi.NextHeader, names[end-1])
		}
		for _, n := range names[start:end] {
			json.NewEncoder(w).Encode(explainapi.DumpedName{Name: n, Types: []string{"A"}, Records: 1})
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s, &asked
}

func TestExplainAsksWithTheQuery(t *testing.T) {
	want := explainapi.Explanation{Name: "web.shop.svc.cluster.local.", Type: "A", Rcode: "NOERROR", Answer: []string{"web.shop.svc.cluster.local.\t30\tIN\tA\t10.0.0.1"}, Reason: explainapi.ReasonService}
	s, asked := endpoint(t, want, nil)
	got, err := Explain(context.Background(), s.Client(), Replica{Pod: "kubetree-a", URL: s.URL}, Query{Name: "web.shop.svc.cluster.local", Type: "aaaa", Client: "10.1.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason != want.Reason || !slices.Equal(got.Answer, want.Answer) {
		t.Errorf("Explain = %+v, want %+v", got, want)
	}
	if q := (*asked)[0]; q != "client=10.1.0.5&name=web.shop.svc.cluster.local&type=AAAA" {
		t.Errorf("asked %q: want the name, the type in upper case and the client", q)
	}
}

func TestExplainRefusalSaysWhatTheEndpointSaid(t *testing.T) {
	s, _ := endpoint(t, explainapi.Explanation{}, nil)
	_, err := Explain(context.Background(), s.Client(), Replica{Pod: "kubetree-a", URL: s.URL}, Query{Name: "a.b", Type: "bogus"})
	if err == nil || !strings.Contains(err.Error(), "kubetree-a: 400 Bad Request: type= must be a DNS type") {
		t.Errorf("err = %v, want the pod, the status and the endpoint's text", err)
	}
}

func TestNothingListeningIsNotKubetree(t *testing.T) {
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close() // the port-forward of a pod where nothing listens on the explain port: connections fail
	_, err := Explain(context.Background(), http.DefaultClient, Replica{Pod: "coredns-x", URL: url}, Query{Name: "a.b"})
	if !errors.Is(err, ErrNotKubetree) || !strings.Contains(err.Error(), "explain option is off") {
		t.Errorf("err = %v, want ErrNotKubetree saying the DNS is not kubetree or explain is off", err)
	}
	// Another server on the port (kube-dns's, say) answers 404 for /explain.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if _, err := Explain(context.Background(), other.Client(), Replica{Pod: "kube-dns-x", URL: other.URL}, Query{Name: "a.b"}); !errors.Is(err, ErrNotKubetree) {
		t.Errorf("err = %v from a server without /explain, want ErrNotKubetree", err)
	}
}

func TestDumpPagesThroughEveryName(t *testing.T) {
	names := []string{"a.x.", "b.x.", "c.x.", "d.x.", "e.x."}
	s, asked := endpoint(t, explainapi.Explanation{}, names)
	var got []string
	err := Dump(context.Background(), s.Client(), Replica{Pod: "kubetree-a", URL: s.URL}, 2, func(n explainapi.DumpedName) error {
		got = append(got, n.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, names) {
		t.Errorf("dumped %v, want %v", got, names)
	}
	if want := []string{"limit=2", "after=b.x.&limit=2", "after=d.x.&limit=2"}; !slices.Equal(*asked, want) {
		t.Errorf("pages asked %v, want %v", *asked, want)
	}
}

func TestQueryCheck(t *testing.T) {
	for _, c := range []struct {
		q    Query
		want string // "" for none
	}{
		{Query{Name: "web.shop.svc.cluster.local", Type: "srv"}, ""},
		{Query{Name: "web.shop.svc.cluster.local"}, ""},
		{Query{Name: "web", Type: "AXFRX"}, `unknown DNS type "AXFRX"`},
		{Query{Name: "a..b"}, "not a domain name"},
		{Query{Name: ""}, "not a domain name"},
	} {
		err := c.q.Check()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v.Check() = %v, want %q", c.q, err, c.want)
		}
	}
}
