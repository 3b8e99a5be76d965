// Package ask asks kubetree's explain endpoint (README "Explain"): one replica's explanation of a
// name, a replica's whole dump a page at a time, and where replicas' explanations disagree.
package ask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/kubetree/kubetree/internal/explainapi"

	"github.com/miekg/dns"
)

// Replica is one DNS pod's explain endpoint, as this machine reaches it (a port-forward's URL).
type Replica struct {
	Pod string // the pod's name
	URL string // http://HOST:PORT
}

// Query is what explain is asked.
type Query struct {
	Name   string
	Type   string // A when empty
	Client string // the client's address; "" for none
}

// ErrNotKubetree is returned when nothing answers on the pod's explain port: the DNS is not
// kubetree, or its explain option is off.
var ErrNotKubetree = errors.New("no explain endpoint")

// Check reports a query that the endpoint would refuse, before any replica is asked.
func (q Query) Check() error {
	if _, ok := dns.IsDomainName(q.Name); !ok || q.Name == "" {
		return fmt.Errorf("%q is not a domain name", q.Name)
	}
	if _, ok := dns.StringToType[strings.ToUpper(q.Type)]; q.Type != "" && !ok {
		return fmt.Errorf("unknown DNS type %q: use a type such as A, AAAA, SRV, PTR, CNAME, TXT", q.Type)
	}
	return nil
}

// Explain asks r to explain q.
func Explain(ctx context.Context, hc *http.Client, r Replica, q Query) (*explainapi.Explanation, error) {
	v := url.Values{"name": {q.Name}}
	if q.Type != "" {
		v.Set("type", strings.ToUpper(q.Type))
	}
	if q.Client != "" {
		v.Set("client", q.Client)
	}
	resp, err := get(ctx, hc, r, "/explain", v)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var x explainapi.Explanation
	if err := json.NewDecoder(resp.Body).Decode(&x); err != nil {
		return nil, fmt.Errorf("pod %s: reading its explanation: %w", r.Pod, err)
	}
	return &x, nil
}

// Dump gives emit every name r holds, asking pageSize names at a time.
func Dump(ctx context.Context, hc *http.Client, r Replica, pageSize int, emit func(explainapi.DumpedName) error) error {
	after := ""
	for {
		v := url.Values{"limit": {fmt.Sprint(pageSize)}}
		if after != "" {
			v.Set("after", after)
		}
		resp, err := get(ctx, hc, r, "/dump", v)
		if err != nil {
			return err
		}
		err = lines(resp.Body, emit)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("pod %s: reading its dump: %w", r.Pod, err)
		}
		if after = resp.Header.Get(explainapi.NextHeader); after == "" {
			return nil
		}
	}
}

func lines(body io.Reader, emit func(explainapi.DumpedName) error) error {
	dec := json.NewDecoder(body)
	for {
		var n explainapi.DumpedName
		switch err := dec.Decode(&n); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		if err := emit(n); err != nil {
			return err
		}
	}
}

// get asks r for path, and turns a refusal into an error that says what the endpoint said.
func get(ctx context.Context, hc *http.Client, r Replica, path string, v url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+path+"?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		// A port-forward whose pod has nothing on the port closes the connection it was given.
		return nil, fmt.Errorf("pod %s: %w (%v): the DNS is not kubetree, or kubetree's explain option is off (README: Explain)", r.Pod, ErrNotKubetree, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode == http.StatusNotFound && !strings.Contains(msg, "server block") {
		return nil, fmt.Errorf("pod %s: %w (%s for %s): the DNS is not kubetree, or its explain option is off", r.Pod, ErrNotKubetree, resp.Status, path)
	}
	return nil, fmt.Errorf("pod %s: %s: %s", r.Pod, resp.Status, msg)
}
