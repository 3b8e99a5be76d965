package watchcost

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	meta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// watchersWindow opens n watches (none: 0), over HTTP/1.1 or HTTP/2, waits -steady-settle, and
// measures one window.
func watchersWindow(ctx context.Context, cfg Options, dir string, cp *measure.ControlPlane, target string, pids map[string]int,
	ch *apicost.Churn, n int, http1 bool, round int) (apicost.Window, error) {
	w := apicost.Window{Round: round, Replicas: n}
	ctx, cancel := context.WithCancel(ctx)
	var readers sync.WaitGroup
	var proxies []*measure.CountingProxy
	defer func() {
		cancel()
		readers.Wait()
		for _, p := range proxies {
			p.Close()
		}
	}()
	if n > 0 {
		list, err := cp.Client.DiscoveryV1().EndpointSlices("").List(ctx, meta.ListOptions{Limit: 1})
		if err != nil {
			return w, err
		}
		from := list.ResourceVersion
		for i := range n {
			p, kc, err := measure.Proxied(dir, fmt.Sprintf("watcher-%d-%d", round, i), cp.Kubeconfig, target)
			if err != nil {
				return w, err
			}
			proxies = append(proxies, p)
			body, err := openSliceWatch(ctx, kc, from, http1)
			if err != nil {
				return w, fmt.Errorf("watcher %d: %w", i, err)
			}
			readers.Go(func() {
				defer body.Close()
				io.Copy(io.Discard, body)
			})
		}
	}
	if err := measure.Sleep(ctx, cfg.Settle); err != nil {
		return w, err
	}
	carried := func() (cpu, down, up float64, err error) {
		for _, p := range proxies {
			down += float64(p.Down.Load())
			up += float64(p.Up.Load())
		}
		return 0, down, up, nil
	}
	proto := map[bool]string{false: "HTTP/2", true: "HTTP/1.1"}[http1]
	err := apicost.MeasureWindow(ctx, cfg.Window, cp, pids, ch, &w, carried, fmt.Sprintf("round %d, %d watchers over %s", round+1, n, proto))
	return w, err
}

// openSliceWatch opens a watch of every EndpointSlice from version through kubeconfig, on a
// connection of its own (HTTP/1.1 or HTTP/2), as a reflector's after its list: protobuf, plain.
func openSliceWatch(ctx context.Context, kubeconfig, version string, http1 bool) (io.ReadCloser, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if http1 {
		rc.NextProtos = []string{"http/1.1"}
	}
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(rc.Host, "/") + "/apis/discovery.k8s.io/v1/endpointslices?watch=true&allowWatchBookmarks=true&resourceVersion=" + version
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf") // as client-go asks
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if want := map[bool]int{false: 2, true: 1}[http1]; resp.ProtoMajor != want {
		resp.Body.Close()
		return nil, fmt.Errorf("the watch came over %s, want HTTP/%d", resp.Proto, want)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" || resp.Uncompressed {
		resp.Body.Close()
		return nil, fmt.Errorf("the watch came compressed (%q), want it plain", enc)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.kubernetes.protobuf") {
		resp.Body.Close()
		return nil, fmt.Errorf("the watch came as %q, want protobuf", ct)
	}
	return resp.Body, nil
}
