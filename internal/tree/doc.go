// Package tree is the name tree kubetree answers from: a trie of DNS names keyed by reversed
// labels, in which each name may hold a Set that the tree stores but never looks inside, beyond
// asking whether it answers the names below its own. It also holds the label helpers that compare
// and split names without allocating. It knows nothing of Kubernetes or of the records it stores;
// CoreDNS's plugin/file/tree and kube-dns's treecache are its models.
package tree
