// Package apiclient makes kubetree's connections to the API server: the rest.Config of the
// kubeconfig or the pod's service account with the in-tree plugin's options (Config); dead
// connections noticed within seconds (WithDeadConnectionDetection); lists asked gzip'd and
// decoded as they stream (gzip.go); at most apiserver_max_inflight
// requests started at once (inflight.go); sockets read with raw read(2) calls, which keep an idle
// process's runtime from waking for them (rawread_linux.go); and the access reviews that authorise
// explain's callers (Reviewer). It knows client-go and nothing of DNS or of the rest of the module.
package apiclient
