package plugin_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/kubetree/kubetree/internal/explain"
	"github.com/kubetree/kubetree/internal/explainapi"
	"github.com/kubetree/kubetree/internal/plugintest"
)

func getExplain(t *testing.T, base, path string, query url.Values) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(base + path + "?" + query.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// TestExplainListenerHandedOver: two instances on one address (two server blocks, or the old and
// the new instance of a reload, which caddy starts before it shuts the old one down) share one
// listener; the newest answers unless server= names another; the listener stays open until the
// last of them shuts down, and then nothing of it is left running.
func TestExplainListenerHandedOver(t *testing.T) {
	c := plugintest.StartCluster(t, plugintest.Zones, webObjects()...)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const addr = "127.0.0.1:0"
	old, cur := c.Explain(c.W), c.Explain(c.W)
	old.Server, cur.Server = "dns://:53", "dns://:1053"
	bound, err := explain.Start(addr, old)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + bound.String()
	if again, err := explain.Start(addr, cur); err != nil || again.String() != bound.String() {
		t.Fatalf("the second instance on %s listens on %v (%v), want the first one's %s", addr, again, err, bound)
	}
	server := func(query url.Values) string {
		resp, body := getExplain(t, base, "/explain", query)
		var x explainapi.Explanation
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &x) != nil {
			t.Fatalf("GET /explain?%s: %s %s", query.Encode(), resp.Status, body)
		}
		if x.Reason != explainapi.ReasonService || len(x.Answer) != 1 {
			t.Errorf("GET /explain?%s: %s %v, want the service's address", query.Encode(), x.Reason, x.Answer)
		}
		return x.Server
	}
	web := url.Values{"name": {"web.prod.svc.cluster.local"}, "type": {"a"}}
	if s := server(web); s != cur.Server {
		t.Errorf("answered by %s, want the newest, %s", s, cur.Server)
	}
	if s := server(url.Values{"name": web["name"], "server": {old.Server}}); s != old.Server {
		t.Errorf("server=%s answered by %s", old.Server, s)
	}
	for _, bad := range []url.Values{{}, {"name": {"web..x"}}, {"name": web["name"], "type": {"NOPE"}}, {"name": web["name"], "client": {"me"}}} {
		if resp, body := getExplain(t, base, "/explain", bad); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /explain?%s: %s %s, want 400", bad.Encode(), resp.Status, body)
		}
	}

	// /dump over HTTP: a page and its cursor, and the whole dump in one response.
	resp, body := getExplain(t, base, "/dump", url.Values{"limit": {"3"}})
	if lines := strings.Count(body, "\n"); resp.StatusCode != http.StatusOK || lines != 3 || resp.Header.Get(explainapi.NextHeader) == "" {
		t.Errorf("GET /dump?limit=3: %s, %d lines, next %q", resp.Status, lines, resp.Header.Get(explainapi.NextHeader))
	}
	var paged []string
	for after := ""; ; {
		resp, body := getExplain(t, base, "/dump", url.Values{"limit": {"5"}, "after": {after}})
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			var n explainapi.DumpedName
			if err := json.Unmarshal(sc.Bytes(), &n); err != nil {
				t.Fatalf("a dump line %q: %v", sc.Text(), err)
			}
			paged = append(paged, n.Name)
		}
		if after = resp.Header.Get(explainapi.NextHeader); after == "" {
			break
		}
	}
	_, whole := getExplain(t, base, "/dump", nil)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(whole), "\n") {
		var n explainapi.DumpedName
		if err := json.Unmarshal([]byte(line), &n); err != nil {
			t.Fatalf("a dump line %q: %v", line, err)
		}
		names = append(names, n.Name)
	}
	if strings.Join(paged, " ") != strings.Join(names, " ") || len(names) < 10 {
		t.Errorf("paged: %v\nwhole: %v", paged, names)
	}

	explain.Stop(addr, cur)
	if s := server(web); s != old.Server {
		t.Errorf("after the newest shut down, answered by %s, want %s", s, old.Server)
	}
	explain.Stop(addr, old)
	if _, err := http.Get(base + "/explain?name=web.prod.svc.cluster.local"); err == nil {
		t.Error("the listener still answers after every instance shut down")
	}
	http.DefaultClient.CloseIdleConnections()
}
