package records

import (
	"net/netip"
	"strings"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"
)

// Names below a service: an endpoint's label, and the labels a query has below a service.

// labelOf is the endpoint's name below its service: its hostname, else its address with dashes; a
// multicluster endpoint's is followed by its cluster (<hostname>.<cluster>).
func labelOf(e object.Endpoint) string {
	l := e.Hostname
	if l == "" {
		l = dashed(e.Addr)
	}
	if e.Cluster != "" {
		return l + "." + e.Cluster
	}
	return l
}

// endpointLabels are the labels of the set's endpoints, each once, in the order of its slices.
func (r *ServiceSet) endpointLabels() []string {
	var labels []string
	known := map[string]bool{}
	for _, sl := range r.slices {
		for i := range sl.Len() {
			if l := labelOf(sl.Endpoint(i)); !known[l] {
				known[l] = true
				labels = append(labels, l)
			}
		}
	}
	return labels
}

// dashed is the name an endpoint without a hostname gets: 10-0-0-1, or for IPv6 the compressed
// form with dashes (fd00--1), a trailing dash completed with 0, as the in-tree plugin does.
func dashed(ip netip.Addr) string {
	var buf [48]byte
	return string(appendDashed(buf[:0], ip))
}

func appendDashed(dst []byte, ip netip.Addr) []byte {
	start := len(dst)
	dst = ip.AppendTo(dst)
	for i := start; i < len(dst); i++ {
		if dst[i] == '.' || dst[i] == ':' {
			dst[i] = '-'
		}
	}
	if dst[len(dst)-1] == '-' {
		dst = append(dst, '0')
	}
	return dst
}

// endpointLabel is a query's label below a service, read once per query: an endpoint with a
// hostname is named by it, one without by its address with dashes, which addr holds when the label
// is one (in its only spelling: 10-0-0-01 names nothing).
type endpointLabel struct {
	text    string // in the query's case
	addr    netip.Addr
	cluster string // in a multicluster zone, the label after it (the source cluster), in the query's case
}

func parseEndpointLabel(label string) endpointLabel {
	l := endpointLabel{text: label}
	if len(label) > 47 || len(label) == 0 {
		return l
	}
	var buf [48]byte
	text := tree.LowerInto(buf[:0], label)
	sep := byte(':')
	if !strings.Contains(label, "--") && strings.Count(label, "-") == 3 {
		sep = '.'
	}
	for i, c := range text {
		if c == '-' {
			text[i] = sep
		}
	}
	ip, ok := object.ParseIP(string(text))
	if !ok {
		return l
	}
	var again [48]byte
	if tree.EqualFold(label, string(appendDashed(again[:0], ip))) {
		l.addr = ip
	}
	return l
}

// denotes reports whether the label names e.
func (l endpointLabel) denotes(e object.Endpoint) bool {
	if !tree.EqualFold(l.cluster, e.Cluster) {
		return false
	}
	if e.Hostname != "" {
		return tree.EqualFold(l.text, e.Hostname)
	}
	return l.addr.IsValid() && l.addr == e.Addr
}

// splitRest splits the labels below a service ("a.b." at most, in the query's case); more says
// there were more than two.
func splitRest(rest string) (first, second string, more bool) {
	if rest == "" {
		return "", "", false
	}
	rest = rest[:len(rest)-1]
	first, rest, _ = strings.Cut(rest, ".")
	second, rest, _ = strings.Cut(rest, ".")
	return first, second, rest != ""
}
