package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// resolvConf is what a pod's /etc/resolv.conf tells its resolver.
type resolvConf struct {
	Nameservers []string
	Search      []string
	Ndots       int // 1 when not set: the resolvers' default
}

func parseResolvConf(text string) resolvConf {
	rc := resolvConf{Ndots: 1}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			rc.Nameservers = append(rc.Nameservers, f[1])
		case "search":
			rc.Search = f[1:]
		case "options":
			for _, o := range f[1:] {
				if v, ok := strings.CutPrefix(o, "ndots:"); ok {
					if n, err := strconv.Atoi(v); err == nil {
						rc.Ndots = n
					}
				}
			}
		}
	}
	return rc
}

// kubeletSearch is the search path the kubelet writes first for a ClusterFirst pod of ns; the
// node's own search domains may follow it.
func kubeletSearch(ns, domain string) []string {
	return []string{ns + ".svc." + domain, "svc." + domain, domain}
}

// kubeletNdots is the ndots the kubelet writes for a ClusterFirst pod.
const kubeletNdots = 5

// checkResolvConf compares rc with what the kubelet should have written for a ClusterFirst pod
// of ns whose cluster DNS is at nameserver. Each difference is a line.
func checkResolvConf(rc resolvConf, ns, domain, nameserver string) []string {
	var bad []string
	if len(rc.Nameservers) == 0 || rc.Nameservers[0] != nameserver {
		bad = append(bad, fmt.Sprintf("nameserver %v, want %s first", rc.Nameservers, nameserver))
	}
	want := kubeletSearch(ns, domain)
	if len(rc.Search) < len(want) || !slices.Equal(rc.Search[:len(want)], want) {
		bad = append(bad, fmt.Sprintf("search %v, want it to begin %v", rc.Search, want))
	}
	if rc.Ndots != kubeletNdots {
		bad = append(bad, fmt.Sprintf("ndots %d, want %d", rc.Ndots, kubeletNdots))
	}
	return bad
}

// queriesPerLookup is how many queries a stub resolver sends for one name of dots dots that is
// not in the cluster (every search domain answers NXDOMAIN): with fewer dots than ndots, one per
// search domain before the name itself; each for A and AAAA, as glibc, musl and Go ask both.
func queriesPerLookup(rc resolvConf, dots int) int {
	names := 1
	if dots < rc.Ndots {
		names += len(rc.Search)
	}
	return 2 * names
}
