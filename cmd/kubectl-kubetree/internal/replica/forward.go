package replica

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	api "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Forward is an open port-forward: a port on the local loopback that reaches a pod's port through
// the API server. In the pod the connection arrives on loopback, which is what kubetree's explain
// endpoint serves without a token.
type Forward struct {
	// URL is http://127.0.0.1:PORT, the pod's port as this machine reaches it.
	URL  string
	stop chan struct{}
	done chan error
}

// Open forwards a local port to pod's port, as `kubectl port-forward pod/NAME :PORT` does.
func Open(cfg *rest.Config, c kubernetes.Interface, pod api.Pod, port int) (*Forward, error) {
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	u := c.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	f := &Forward{stop: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{":" + strconv.Itoa(port)}, f.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, err
	}
	go func() { f.done <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-f.done:
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		f.Close()
		return nil, fmt.Errorf("port-forward to pod %s/%s: no local port (%v)", pod.Namespace, pod.Name, err)
	}
	f.URL = "http://127.0.0.1:" + strconv.Itoa(int(ports[0].Local))
	return f, nil
}

// Close ends the port-forward and waits for it.
func (f *Forward) Close() {
	close(f.stop)
	<-f.done
}
