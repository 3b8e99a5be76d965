// Package external is the kubetree_external plugin: CoreDNS's k8s_external with kubetree as its
// source. It serves the external addresses of the cluster's services (spec.externalIPs and load
// balancer ingress) under zones of their own as <service>.<namespace>.<zone>, with k8s_external's
// options, names and answers (apex SOA and NS, SRV, headless endpoints, transfers). It reaches
// kubetree only through the Cluster interface, which the kubetree instance of the same server
// block implements; a server block without kubetree is refused at start-up.
package external
