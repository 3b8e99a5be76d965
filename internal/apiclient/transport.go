package apiclient

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/connrotation"
)

// Options say which API server to reach and how, as the Corefile's endpoint, tls, kubeconfig,
// apiserver_qps, apiserver_burst and apiserver_max_inflight options do.
type Options struct {
	Endpoint                string
	TLSCert, TLSKey, TLSCA  string
	Kubeconfig, KubeContext string
	QPS                     float32 // 0: client-go's default
	Burst                   int     // 0: client-go's default
	MaxInflight             int     // 0: no limit
}

// Config builds the client configuration the way the in-tree plugin does (a kubeconfig if given,
// else the endpoint with tls, else the in-cluster service account), with a transport of its own
// (WithDeadConnectionDetection): every instance has one, and Close closes its connections.
func Config(o Options) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	switch {
	case o.Kubeconfig != "":
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: o.KubeContext}).ClientConfig()
	case o.Endpoint != "":
		rc = &rest.Config{Host: o.Endpoint, TLSClientConfig: rest.TLSClientConfig{
			CertFile: o.TLSCert, KeyFile: o.TLSKey, CAFile: o.TLSCA}}
	default:
		rc, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			err = fmt.Errorf("no endpoint or kubeconfig given, and not running in a cluster: %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rc.UserAgent = "kubetree"
	if o.QPS > 0 {
		rc.QPS = o.QPS
	}
	if o.Burst > 0 {
		rc.Burst = o.Burst
	}
	if o.MaxInflight > 0 {
		rc.Wrap(maxInflight(o.MaxInflight))
	}
	return WithDeadConnectionDetection(rc)
}

// A connection to an API server can die without a word: the host loses power, a network path
// black-holes, a load balancer or the server itself stops forwarding. The TCP connection then stays
// open with no one behind it, and client-go would notice only through its HTTP/2 health check
// (30 s idle, then 15 s for the ping), serving stale data meanwhile. Every watch kubetree has shares
// one HTTP/2 connection, so one short health check covers them all: after ReadIdle without a
// frame the transport sends a PING, and closes the connection when no answer comes within
// PingTimeout; the watches then fail, and are opened again on a new connection (which the
// cluster's load balancing may send to a healthy API server). An idle replica sends one PING frame
// (17 bytes, about 100 with TLS and TCP) every ReadIdle, answered as small: well under 100 bytes
// a second. A new connection gets apiDialTimeout to connect and apiDialTimeout for its TLS handshake.
const (
	ReadIdle        = 3 * time.Second
	PingTimeout     = 2 * time.Second
	apiStreamBuffer = 1 << 20
	apiDialTimeout  = 5 * time.Second
	// apiTCPKeepAlive also probes a connection whose host is gone; apiTCPUserTimeout then bounds how
	// long sent data may stay unacknowledged (Linux), so a black-holed write fails too.
	apiTCPKeepAlive   = 5 * time.Second
	apiTCPUserTimeout = 10 * time.Second
)

// WithDeadConnectionDetection gives rc a transport of its own with those limits. client-go adds its
// authentication on top of it; the TLS settings move into it.
func WithDeadConnectionDetection(rc *rest.Config) (*rest.Config, error) {
	tlsConfig, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, err
	}
	proxy := http.ProxyFromEnvironment
	if rc.Proxy != nil {
		proxy = rc.Proxy
	}
	dialer := &net.Dialer{Timeout: apiDialTimeout, KeepAlive: apiTCPKeepAlive, Control: tcpUserTimeout(apiTCPUserTimeout)}
	tracked := connrotation.NewDialer(withRawReads(dialer.DialContext))
	t := &http.Transport{
		Proxy:               proxy,
		DialContext:         tracked.DialContext,
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: apiDialTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
		HTTP2: &http.HTTP2Config{SendPingTimeout: ReadIdle, PingTimeout: PingTimeout,
			// What the API server may send ahead of the decoder, per watch: during a list it sends
			// faster than objects are decoded, and Go's default (4 MiB a stream) is memory held at
			// the worst moment, a relist. 1 MiB still carries hundreds of MB/s at a millisecond's RTT.
			MaxReceiveBufferPerStream: apiStreamBuffer},
		// gzipTransport asks for gzip and decodes it, with a faster decoder than net/http's
		// compress/gzip: with it, a sixth of kubetree's CPU per pod change went to decompressing
		// single watch events.
		DisableCompression: true,
	}
	// The busy watches' HTTP/1.1 (the watcher's busy watches): the same dialer and limits, no HTTP/2. Its TLS
	// configuration is a copy, as net/http adds "h2" to the one of a transport that speaks it.
	t1 := t.Clone()
	t1.ForceAttemptHTTP2, t1.HTTP2 = false, nil
	t1.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	t1.TLSClientConfig = tlsConfig.Clone()
	if t1.TLSClientConfig == nil {
		t1.TLSClientConfig = &tls.Config{}
	}
	t1.TLSClientConfig.NextProtos = []string{"http/1.1"}
	out := rest.CopyConfig(rc)
	out.TLSClientConfig = rest.TLSClientConfig{}
	out.Transport = ownTransport{RoundTripper: gzipTransport{next: t}, http1: gzipTransport{next: t1}, conns: tracked.ConnectionTracker}
	out.Dial, out.Proxy = nil, nil
	return out, nil
}

// ownTransport is one instance's transport (WithDeadConnectionDetection). It tracks the connections
// it dialed so that the instance's OnShutdown can close them all: CloseIdleConnections would leave
// a connection whose last watch is still being torn down when it runs, and with it the connection's
// read loop, until the idle timeout (90 s), after every reload.
type ownTransport struct {
	http.RoundTripper                   // gzipTransport over the *http.Transport
	http1             http.RoundTripper // the same over HTTP/1.1 only, for busy watches (HTTP1Config)
	conns             *connrotation.ConnectionTracker
}

// WrappedRoundTripper lets client-go reach the transports underneath (utilnet.RoundTripperWrapper).
func (t ownTransport) WrappedRoundTripper() http.RoundTripper { return t.RoundTripper }

// HTTP1Config is rc over HTTP/1.1, through the same dialer, whose connections Close closes too; nil when rc has no transport of ours.
func HTTP1Config(rc *rest.Config) *rest.Config {
	t, ok := rc.Transport.(ownTransport)
	if !ok {
		return nil
	}
	out := rest.CopyConfig(rc)
	out.Transport = ownTransport{RoundTripper: t.http1, http1: t.http1, conns: t.conns}
	return out
}

// Close closes every connection rc's transport dialed, if it is an ownTransport.
func Close(rc *rest.Config) {
	if t, ok := rc.Transport.(ownTransport); ok {
		t.conns.CloseAll()
	}
}
