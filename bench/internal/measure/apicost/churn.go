package apicost

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/kubetree/kubetree/bench/internal/measure"
)

// Churn updates EndpointSlices at a steady rate, each update as the EndpointSlice
// controller writes it for one pod: in turn, an endpoint loses its readiness, regains it, and its
// pod is replaced by one with a new name, UID, node and address. Every update is stamped with its
// trigger time. Services are taken round-robin, so a slice is rarely written twice in a row.
type Churn struct {
	cl           *measure.Cluster
	rate         int
	Done, Failed atomic.Int64
	mu           []sync.Mutex                 // by service: one writer at a time
	slices       []*discoveryv1.EndpointSlice // by service, as last written; nil until then
	replaced     atomic.Int64                 // pods replaced so far, for their new addresses
}

func newChurn(cl *measure.Cluster, rate int) *Churn {
	return &Churn{cl: cl, rate: rate, mu: make([]sync.Mutex, len(cl.Services)), slices: make([]*discoveryv1.EndpointSlice, len(cl.Services))}
}

// replacedIP is the address of the n-th replacement pod: 10.224.0.0/11, clear of measure.PodIP's
// first 4M, -slice-updates' moved addresses and -fleet's.
func replacedIP(n int) string { return measure.PodIP(6<<20 + n%(2<<20)) }

// update makes the n-th change: service n%len, endpoint (n/len)%endpoints; what happens to the
// endpoint goes round not-ready, ready, replaced with each pass over the services.
func (c *Churn) update(ctx context.Context, writer kubernetes.Interface, n int) error {
	i := n % len(c.cl.Services)
	s := c.cl.Services[i]
	pass := n / len(c.cl.Services)
	j := pass % c.cl.Endpoints
	c.mu[i].Lock()
	defer c.mu[i].Unlock()
	slice := c.slices[i]
	if slice == nil {
		slice, _ = measure.BenchSlice(s, s.IPs, true)
	} else {
		slice = slice.DeepCopy()
	}
	e := &slice.Endpoints[j]
	switch (pass / c.cl.Endpoints) % 3 {
	case 0: // the pod's readiness probe fails
		e.Conditions.Ready, e.Conditions.Serving = measure.Ptr(false), measure.Ptr(false)
	case 1: // and passes again
		e.Conditions.Ready, e.Conditions.Serving = measure.Ptr(true), measure.Ptr(true)
	case 2: // the pod is replaced
		m := int(c.replaced.Add(1))
		e.Addresses = []string{replacedIP(m)}
		e.Conditions.Ready, e.Conditions.Serving, e.Conditions.Terminating = measure.Ptr(true), measure.Ptr(true), measure.Ptr(false)
		e.NodeName = measure.Ptr(fmt.Sprintf("node-%04d", m%5000))
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: s.NS,
			Name: fmt.Sprintf("%s-7d9f8b6c5d-r%05d", s.Name, m), UID: uuid.NewUUID()}
	}
	slice.Annotations[corev1.EndpointsLastChangeTriggerTime] = time.Now().UTC().Format(time.RFC3339Nano)
	slice.ResourceVersion = "" // unconditional: the bench is the slices' only writer
	written, err := writer.DiscoveryV1().EndpointSlices(s.NS).Update(ctx, slice, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
	if err != nil {
		return err
	}
	c.slices[i] = written
	return nil
}

// startChurn starts the churn at rate updates a second; stop ends it and waits for its writers.
func startChurn(ctx context.Context, cl *measure.Cluster, writer kubernetes.Interface, rate int) (ch *Churn, stop func()) {
	measure.Logf("== EndpointSlice updates at %d a second from now on", rate)
	ch = newChurn(cl, rate)
	done := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { ch.run(ctx, writer, done) })
	return ch, sync.OnceFunc(func() {
		close(done)
		bg.Wait()
	})
}

// run updates at c.rate a second until stop; what the writers cannot keep up with is counted as
// failed (the achieved rate is reported).
func (c *Churn) run(ctx context.Context, writer kubernetes.Interface, stop chan struct{}) {
	tokens := make(chan int, 64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for n := range tokens {
				if err := c.update(ctx, writer, n); err != nil {
					if c.Failed.Add(1) <= 3 && ctx.Err() == nil {
						measure.Logf("churn: %v", err)
					}
				} else {
					c.Done.Add(1)
				}
			}
		})
	}
	measure.PaceTokens(ctx, stop, tokens, c.rate, &c.Failed)
	wg.Wait()
}

// Churning is the churn under which -steady and -watch-cost measure their windows, once it has
// settled, and the control plane it runs against.
type Churning struct {
	*Churn
	Began       time.Time           // when the churn began
	Target      string              // the API server's address
	PIDs        map[string]int      // kube-apiserver's and etcd's
	First       measure.APICounters // the API server's counters once the churn settled
	ScrapeAlloc float64             // what one scrape of the API server's metrics makes it allocate
}

// StartChurning starts the churn on cl at rate updates a second, from a protobuf client of its
// own, and returns once it has run for settle; stop ends it.
func StartChurning(ctx context.Context, cp *measure.ControlPlane, cl *measure.Cluster, rate int, settle time.Duration) (c *Churning, stop func(), err error) {
	c = &Churning{}
	if c.Target, c.PIDs, err = cp.Processes(); err != nil {
		return nil, nil, err
	}
	writer, err := measure.ProtobufClient(cp.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	c.Began = time.Now()
	c.Churn, stop = startChurn(ctx, cl, writer, rate)
	if err := measure.Sleep(ctx, settle); err != nil {
		stop()
		return nil, nil, err
	}
	if c.First, c.ScrapeAlloc, err = cp.ScrapeCost(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}
