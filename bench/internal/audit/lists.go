package audit

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubetree/kubetree/bench/internal/measure"
	"github.com/kubetree/kubetree/bench/internal/measure/apicost"
)

// listPass is what one pass of the audit's metadata lists, asked for directly, cost.
type listPass struct {
	page     int64 // 0: one list, as kubetree asks
	gzip     bool
	changed  bool // each resource changed just before
	passes   int
	requests int
	bytes    float64 // sent by the API server, per pass
	apiCPU   float64 // its CPU seconds per pass (median), less its rate at rest
	alloc    float64 // its heap allocations per pass
}

// touch changes an annotation of one namespace, one service and one EndpointSlice of cl.
func touch(ctx context.Context, cp *measure.ControlPlane, cl *measure.Cluster) error {
	s := cl.Services[0]
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"kubetree.bench/touched":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	if _, err := cp.Client.CoreV1().Namespaces().Patch(ctx, s.NS, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	if _, err := cp.Client.CoreV1().Services(s.NS).Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	_, err := cp.Client.DiscoveryV1().EndpointSlices(s.NS).Patch(ctx, s.Name+"-bench", types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// measureListPasses lists what kubetree's audit lists (the names and versions of every service,
// EndpointSlice and namespace, protobuf) as v says (in one list, or in pages; gzip asked for or
// not), n times, through a counting proxy; one pass at a time, with the API server's CPU
// rate at rest measured before and subtracted.
func measureListPasses(ctx context.Context, dir string, cp *measure.ControlPlane, target string, apiPID int, rest apicost.Rest, v listPass, n int) (listPass, error) {
	out := v
	out.passes = n
	name := fmt.Sprintf("lists-%d-gzip-%v-changed-%v", v.page, v.gzip, v.changed)
	proxy, kc, err := measure.Proxied(dir, name, cp.Kubeconfig, target)
	if err != nil {
		return out, err
	}
	defer proxy.Close()
	md, err := metadataClient(kc, v.gzip)
	if err != nil {
		return out, err
	}
	restCPU, err := cpuAtRest(ctx, apiPID)
	if err != nil {
		return out, err
	}
	m0, err := cp.APIMetrics(ctx)
	if err != nil {
		return out, err
	}
	var cpus []float64
	t0 := time.Now()
	for range n {
		if err := measure.Sleep(ctx, time.Second); err != nil {
			return out, err
		}
		c0, err := measure.ProcCPU(apiPID)
		if err != nil {
			return out, err
		}
		b0, start := proxy.Down.Load(), time.Now()
		if out.requests, err = listAudited(ctx, md, v.page); err != nil {
			return out, err
		}
		took := time.Since(start)
		if err := measure.Sleep(ctx, apicost.AuditTail); err != nil { // as in the audits' windows
			return out, err
		}
		c1, err := measure.ProcCPU(apiPID)
		if err != nil {
			return out, err
		}
		out.bytes += float64(proxy.Down.Load() - b0)
		cpus = append(cpus, c1-c0-restCPU*(took+apicost.AuditTail).Seconds())
	}
	m1, err := cp.APIMetrics(ctx)
	if err != nil {
		return out, err
	}
	out.bytes /= float64(n)
	out.apiCPU = measure.Median(cpus)
	out.alloc = (m1.Alloc - m0.Alloc - rest.ScrapeAlloc - rest.APIAlloc*time.Since(t0).Seconds()) / float64(n)
	measure.Logf("%s: %s, %.3f s of the API server's CPU and %s of its heap a pass", out.label(), measure.Human(out.bytes), out.apiCPU, measure.Human(out.alloc))
	return out, nil
}

// metadataClient lists metadata through kubeconfig, gzip-compressed or not, without client-side
// pacing.
func metadataClient(kubeconfig string, gzip bool) (metadata.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 1000, 1000
	rc.DisableCompression = !gzip
	return metadata.NewForConfig(rc)
}

// cpuAtRest is the CPU seconds a second the process pid uses over 10 s.
func cpuAtRest(ctx context.Context, pid int) (float64, error) {
	c0, err := measure.ProcCPU(pid)
	if err != nil {
		return 0, err
	}
	if err := measure.Sleep(ctx, 10*time.Second); err != nil {
		return 0, err
	}
	c1, err := measure.ProcCPU(pid)
	if err != nil {
		return 0, err
	}
	return (c1 - c0) / 10, nil
}

// listAudited lists auditedResources' metadata once, in pages of page (0: one list each), and
// returns the requests it made.
func listAudited(ctx context.Context, md metadata.Interface, page int64) (requests int, err error) {
	for _, r := range auditedResources {
		opts := metav1.ListOptions{Limit: page}
		for {
			l, err := md.Resource(r).List(ctx, opts)
			if err != nil {
				return requests, err
			}
			requests++
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
	}
	return requests, nil
}

// auditedResources are what kubetree's audit lists by default.
var auditedResources = []schema.GroupVersionResource{
	corev1.SchemeGroupVersion.WithResource("services"),
	corev1.SchemeGroupVersion.WithResource("namespaces"),
	discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
}

func (ps listPass) label() string {
	how := "one list"
	if ps.page > 0 {
		how = fmt.Sprintf("pages of %d", ps.page)
	}
	if ps.gzip {
		how += ", gzip"
	} else {
		how += ", uncompressed"
	}
	if ps.page > 0 && ps.changed {
		how += ", each resource changed just before"
	} else if ps.page > 0 {
		how += ", resources unchanged"
	}
	if ps.page == 0 && ps.gzip {
		how += " (as kubetree)"
	}
	return how
}
